// The widget manager (ipywidgets 8, html-manager 1.0) typesets widget labels with MathJax 2's
// `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`. The site runs MathJax 3, so map that call
// onto MathJax 3's typesetPromise. Loaded with `defer` after MathJax itself.
(function () {
  if (!window.MathJax || window.MathJax.Hub) return;
  window.MathJax.Hub = {
    Queue: function (job) {
      var element = Array.isArray(job) ? job[2] : null;
      if (element && window.MathJax.typesetPromise) window.MathJax.typesetPromise([element]);
    },
  };
})();
