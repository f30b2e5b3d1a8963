// The widget manager (ipywidgets 8, html-manager 1.0) typesets widget labels with MathJax 2's
// `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`. The book's math is typeset at build time
// (book/_ext/fast_pages.py), so pages load no MathJax; this shim answers that call by loading the vendored
// MathJax 3 only when a widget's element holds TeX, then typesetting that element. Loaded with `defer`.
(function () {
  if (window.MathJax) return;
  var script = document.currentScript;
  var pending = [];
  var requested = false;
  var hub = {
    Queue: function (job) {
      var element = Array.isArray(job) ? job[2] : null;
      // The manager asks for every label; only one holding TeX (as MathJax 3 finds it) needs MathJax.
      if (!element || !/\\\(|\\\[|\$\$|\\begin\{/.test(element.textContent || "")) return;
      if (window.MathJax && window.MathJax.typesetPromise) {
        window.MathJax.typesetPromise([element]);
        return;
      }
      pending.push(element);
      if (requested) return;
      requested = true;
      window.MathJax = {
        Hub: hub,
        startup: {
          typeset: false,
          pageReady: function () {
            window.MathJax.Hub = hub;
            return window.MathJax.typesetPromise(pending);
          },
        },
      };
      var loader = document.createElement("script");
      loader.src = new URL("mathjax/tex-mml-chtml.js", script.src).href;
      loader.async = true;
      document.head.appendChild(loader);
    },
  };
  window.MathJax = { Hub: hub };
})();
