// Optional: sort the students table by a header click and filter it by text.
// Without this script the table is complete and in id order; nothing here fetches anything.
(function () {
  "use strict";
  var table = document.getElementById("students");
  if (!table || !table.tHead || !table.tBodies.length) { return; }
  var body = table.tBodies[0];
  var headers = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(headers, function (th, col) {
    var type = th.getAttribute("data-sort");
    if (!type) { return; }
    var button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.textContent = th.textContent;
    th.textContent = "";
    th.appendChild(button);
    function key(row) {
      var cell = row.cells[col];
      var v = cell.getAttribute("data-value");
      if (v === null) { v = cell.textContent.trim(); }
      return type === "number" ? parseFloat(v) : v.toLowerCase();
    }
    button.addEventListener("click", function () {
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  var box = document.getElementById("filter-box");
  var input = document.getElementById("filter");
  if (box && input) {
    box.hidden = false;
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      Array.prototype.forEach.call(body.rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) === -1;
      });
    });
  }
})();
