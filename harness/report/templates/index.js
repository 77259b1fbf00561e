(function () {
  "use strict";
  var text = document.getElementById("filter-text");
  var verdict = document.getElementById("filter-verdict");
  var suite = document.getElementById("filter-suite");
  var count = document.getElementById("filter-count");
  var table = document.getElementById("run-table");
  if (!table) { return; }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  function apply() {
    var words = text.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var haystack = row.textContent.toLowerCase();
      var ok = words.every(function (w) { return haystack.indexOf(w) !== -1; })
        && (!verdict.value || row.getAttribute("data-verdict") === verdict.value)
        && (!suite.value || row.getAttribute("data-suite") === suite.value);
      row.classList.toggle("hidden", !ok);
      if (ok) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " shown";
  }
  [text, verdict, suite].forEach(function (el) { el.addEventListener("input", apply); });
  var query = new URLSearchParams(window.location.search);
  if (query.get("q")) { text.value = query.get("q"); }
  if (query.get("verdict")) { verdict.value = query.get("verdict"); }
  apply();
})();
