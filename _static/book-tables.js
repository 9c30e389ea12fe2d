// Mark each text table that is wider than the text column even with its cells
// wrapped between words, so that _static/book.css lets it break long code names
// too. Re-checked when the window is resized. Linked from every page by Jupyter
// Book (every .js file in _static/ is).
(function () {
  "use strict";
  function fitTables() {
    var boxes = document.querySelectorAll(".bd-article .pst-scrollable-table-container");
    boxes.forEach(function (box) {
      var table = box.querySelector("table.table");
      if (!table) return;
      table.classList.remove("book-table-tight");
      if (table.getBoundingClientRect().width > box.clientWidth + 1) {
        table.classList.add("book-table-tight");
      }
    });
  }
  var pending = null;
  function later() {
    if (pending !== null) cancelAnimationFrame(pending);
    pending = requestAnimationFrame(function () {
      pending = null;
      fitTables();
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", fitTables);
  } else {
    fitTables();
  }
  window.addEventListener("load", later);
  window.addEventListener("resize", later);
  if (document.fonts && document.fonts.ready) document.fonts.ready.then(later);
})();
