// Typeset TeX to MathJax 3 CommonHTML at build time (book/_ext/fast_pages.py runs it; see there).
//
//   node prerender_math.js < pages.json > rendered.json
//
// Input: {"ex": EX, "pages": [{"fontURL": URL, "math": [[tex, display], ...]}, ...]}.
// Output: {"pages": [{"css": STYLESHEET, "html": [HTML, ...]}, ...]}, one stylesheet per page holding only what
// that page's formulas use. The TeX packages are those the browser's tex-mml-chtml component loads or
// autoloads, without noerrors and noundefined: a formula MathJax cannot typeset stops the build (exit 1, the
// formula and the error on stderr) instead of reaching a reader as red TeX. Each formula keeps the hidden
// MathML copy (assistive-mml) that the browser's MathJax adds for screen readers.
// The package mathjax-full is installed from npm by the Makefile (node_modules at NODE_PATH).
'use strict';
const {mathjax} = require('mathjax-full/js/mathjax.js');
const {TeX} = require('mathjax-full/js/input/tex.js');
const {CHTML} = require('mathjax-full/js/output/chtml.js');
const {liteAdaptor} = require('mathjax-full/js/adaptors/liteAdaptor.js');
const {RegisterHTMLHandler} = require('mathjax-full/js/handlers/html.js');
const {AssistiveMmlHandler} = require('mathjax-full/js/a11y/assistive-mml.js');
const {AllPackages} = require('mathjax-full/js/input/tex/AllPackages.js');

const PACKAGES = AllPackages.filter(p => !['noerrors', 'noundefined', 'textmacros', 'autoload', 'require'].includes(p));
const adaptor = liteAdaptor();
AssistiveMmlHandler(RegisterHTMLHandler(adaptor));

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
// em and ex: the reader's font size and the x-height of the theme's text font, which MathJax in the browser
// measures; the formula is scaled to match that x-height, as the browser would (matchFontHeight).
const em = 16, ex = input.ex || 9.0, scale = ex / (0.442 * em);  // 0.442 em: the x-height of MathJax's TeX font
const out = {pages: []};
let failed = 0;
for (const page of input.pages) {
  const tex = new TeX({packages: PACKAGES, formatError: (jax, err) => { throw err; }});
  const chtml = new CHTML({fontURL: page.fontURL, adaptiveCSS: true});
  const doc = mathjax.document('', {InputJax: tex, OutputJax: chtml});
  const html = [];
  for (const [source, display] of page.math) {
    try {
      const node = doc.convert(source, {display, em, ex, scale, containerWidth: 80 * em});
      html.push(adaptor.outerHTML(node));
    } catch (err) {
      failed += 1;
      process.stderr.write(`${page.name || ''}: MathJax cannot typeset ${JSON.stringify(source)}: ${err.message}\n`);
      html.push('');
    }
  }
  out.pages.push({css: adaptor.textContent(chtml.styleSheet(doc)), html});
}
if (failed) {
  process.stderr.write(`${failed} formula(s) failed to typeset\n`);
  process.exit(1);
}
process.stdout.write(JSON.stringify(out));
