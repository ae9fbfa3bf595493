// Optional: collapse a case's heatmaps to one at a time and toggle the hatching.
// Without this script every heatmap is shown, hatched; nothing here fetches anything.
// The words come from the controls' data-label-* attributes, in the page's language.
(function () {
  "use strict";
  var groups = document.querySelectorAll("[data-hm-group]");
  Array.prototype.forEach.call(groups, function (group) {
    var figs = group.querySelectorAll("figure.hm-figure");
    var bar = group.querySelector(".hm-controls");
    if (!bar || figs.length === 0) { return; }
    var buttons = [];
    function show(i) {
      Array.prototype.forEach.call(figs, function (f, j) { f.hidden = j !== i; });
      buttons.forEach(function (b, j) { b.setAttribute("aria-pressed", j === i ? "true" : "false"); });
    }
    if (figs.length > 1) {
      var label = document.createElement("span");
      label.textContent = bar.getAttribute("data-label-slice");
      bar.appendChild(label);
      Array.prototype.forEach.call(figs, function (fig, i) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = fig.getAttribute("data-hm-title");
        b.addEventListener("click", function () { show(i); });
        buttons.push(b);
        bar.appendChild(b);
      });
      show(0);
    }
    if (group.querySelector(".overlay")) {
      var box = document.createElement("input");
      box.type = "checkbox";
      box.checked = true;
      box.addEventListener("change", function () { group.classList.toggle("no-overlay", !box.checked); });
      var lab = document.createElement("label");
      lab.appendChild(box);
      lab.appendChild(document.createTextNode(" " + bar.getAttribute("data-label-hatch")));
      bar.appendChild(lab);
    }
    bar.hidden = false;
  });
})();
