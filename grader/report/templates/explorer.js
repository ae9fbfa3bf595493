// The mask experiment: scores, masks and weights of one attention call, replayed live.
// Each section[data-explorer] carries its data as JSON (grader/report/explorer_view.py); the words
// come from #explorer-words, in the page's language. Nothing here fetches anything.
// The softmax below is the one grader/checks/explore.py `replay` computes, in float64 as there.
(function () {
  "use strict";
  var wordsEl = document.getElementById("explorer-words");
  if (!wordsEl) { return; }
  var W = JSON.parse(wordsEl.textContent);
  var MIN = -3.4028234663852886e38;

  function say(key, args) {
    var s = W[key] || key;
    Object.keys(args || {}).forEach(function (k) { s = s.split("{" + k + "}").join(String(args[k])); });
    return s;
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function num(x) { return x === null ? NaN : x === "-inf" ? -Infinity : x === "inf" ? Infinity : x === "min" ? MIN : x; }
  // Short text for a cell: 0, 1, .25, -1.3, NaN, −∞.
  function short(v) {
    if (isNaN(v)) { return "NaN"; }
    if (v === -Infinity) { return "−∞"; }
    if (v <= -1e8) { return "min"; }
    if (Math.abs(v) < 0.005) { return "0"; }
    if (Math.abs(v - Math.round(v)) < 0.005 && Math.abs(v) < 100) { return String(Math.round(v)).replace("-", "−"); }
    var s = Math.abs(v) >= 10 ? v.toFixed(0) : v.toFixed(2);
    if (Math.abs(v) < 1) { s = s.replace("0.", "."); }
    return s.replace("-", "−");
  }

  // rule: {fill: number, empty: "zero"|"uniform"|"nan", after: bool}
  function softmaxRow(s, keep, rule) {
    var n = s.length, i, any = keep.some(function (x) { return x; });
    if (!any && rule.empty === "zero") { return s.map(function () { return 0; }); }
    if (!any && rule.empty === "nan") { return s.map(function () { return NaN; }); }
    var vals = rule.after ? s.slice() : s.map(function (x, k) { return keep[k] ? x : rule.fill; });
    var m = Math.max.apply(null, vals), e = [], total = 0;
    for (i = 0; i < n; i++) { e.push(Math.exp(vals[i] - m)); total += e[i]; }
    return e.map(function (x, k) { var w = x / total; return rule.after && !keep[k] ? 0 : w; });
  }

  function setup(root) {
    var D = JSON.parse(root.querySelector("script.ex-data").textContent);
    var S = D.s, B = S.length, H = S[0].length, Lq = S[0][0].length, Lk = S[0][0][0].length;
    var off = D.o, uid = root.id;
    var level = Math.min(6, Number(root.querySelector("h2, h3, h4, h5").tagName.charAt(1)) + 1);
    var state = {on: D.p.map(function () { return true; }), b: 0, h: 0, row: null, rule: 0};
    var rules = [];
    var REF = {fill: -Infinity, empty: "zero", after: false, key: "ref_rule"};
    if (!D.k && !D.m) {
      if (D.f !== null) {
        rules.push({fill: num(D.f), empty: D.e, after: D.a, yours: true,
                    label: D.a ? W.yours_after : say("yours_rule", {fill: short(num(D.f))})});
      } else {
        rules.push({yours: true, actual: true, label: say("yours_rule_unknown")});
      }
    }
    if (D.m) { rules.push({fill: -Infinity, empty: "zero", after: false, yours: true, mask: true, label: W.ref_rule}); }
    else {
      [REF, {fill: -Infinity, empty: "nan", after: false, key: "inf_rule"},
       {fill: MIN, empty: "uniform", after: false, key: "min_rule"},
       {fill: 0, empty: "uniform", after: false, key: "zero_rule"}].forEach(function (r) {
        r.label = W[r.key]; rules.push(r);
      });
    }

    function keepOf(b, q, useYourMask) {
      var row = [];
      for (var k = 0; k < Lk; k++) {
        var ok = true;
        if (useYourMask && D.m && allOn()) { ok = D.m[b][q][k]; }
        else {
          D.p.forEach(function (p, i) {
            if (!state.on[i]) { return; }
            var v = p[0] === "causal" ? p[1][q][k] : p[0] === "padding" ? p[1][b][k] : p[1][b][q][k];
            ok = ok && v;
          });
        }
        row.push(ok);
      }
      return row;
    }
    function allOn() { return state.on.every(function (x) { return x; }); }
    function bits() { return state.on.reduce(function (a, x, i) { return a + (x ? 1 << i : 0); }, 0); }

    function referenceRow(b, h, q) {
      var stored = D.r && D.r[bits()];
      if (stored) { return stored[b][h][q].map(num); }
      return softmaxRow(S[b][h][q], keepOf(b, q, false), REF);
    }
    function ruleRow(b, h, q) {
      var r = rules[state.rule];
      if (r.actual) { return allOn() ? D.y[b][h][q].map(num) : null; }
      return softmaxRow(S[b][h][q], keepOf(b, q, !!r.mask), r);
    }
    function shownScores(b, h, q) {
      var r = rules[state.rule], keep = keepOf(b, q, !!r.mask);
      return S[b][h][q].map(function (x, k) {
        if (keep[k] || r.after) { return {v: x, masked: !keep[k]}; }
        return {v: r.actual ? null : r.fill, masked: true};
      });
    }

    // --- controls -----------------------------------------------------------------------------
    var controls = el("div", {"class": "ex-controls"});
    if (D.p.length) {
      var fs = el("fieldset"); fs.appendChild(el("legend", {}, W.masks));
      D.p.forEach(function (p, i) {
        var id = uid + "-part" + i, lab = el("label", {"for": id});
        var box = el("input", {type: "checkbox", id: id, "data-part": p[0]});
        box.checked = true;
        box.addEventListener("change", function () { state.on[i] = box.checked; draw(); });
        lab.appendChild(box); lab.appendChild(document.createTextNode(" " + W[p[0]]));
        fs.appendChild(lab);
      });
      controls.appendChild(fs);
    }
    function chooser(name, n, base, key) {
      if (n < 2) { return; }
      var fs = el("fieldset", {"class": "ex-choose"}); fs.appendChild(el("legend", {}, W[name]));
      var buttons = [];
      for (var i = 0; i < n; i++) {
        (function (i) {
          var b = el("button", {type: "button", "aria-pressed": i === 0 ? "true" : "false"}, String(base + i));
          b.setAttribute("data-" + name, String(base + i));
          b.setAttribute("aria-label", W[name] + " " + (base + i));
          b.addEventListener("click", function () {
            state[key] = i;
            buttons.forEach(function (x, j) { x.setAttribute("aria-pressed", j === i ? "true" : "false"); });
            draw();
          });
          buttons.push(b); fs.appendChild(b);
        })(i);
      }
      controls.appendChild(fs);
    }
    chooser("batch", B, off[0], "b");
    chooser("head", H, off[1], "h");
    if (rules.length > 1) {
      var rf = el("fieldset", {"class": "ex-rules"}); rf.appendChild(el("legend", {}, W.rule));
      rules.forEach(function (r, i) {
        var id = uid + "-rule" + i, lab = el("label", {"for": id});
        var radio = el("input", {type: "radio", name: uid + "-rule", id: id, value: String(i)});
        radio.checked = i === 0;
        radio.addEventListener("change", function () { if (radio.checked) { state.rule = i; draw(); } });
        lab.appendChild(radio); lab.appendChild(document.createTextNode(" " + r.label));
        rf.appendChild(lab);
      });
      controls.appendChild(rf);
    }
    root.appendChild(controls);
    var panels = el("div", {"class": "ex-panels"});
    root.appendChild(panels);
    var detail = el("div", {"class": "ex-detail"});
    root.appendChild(detail);
    var status = el("p", {"class": "ex-status", role: "status", "aria-live": "polite"});
    root.appendChild(status);
    var legend = el("p", {"class": "ex-legend muted"});
    legend.appendChild(el("span", {"class": "sw masked"}));
    legend.appendChild(document.createTextNode(" " + W.legend_masked + "  "));
    legend.appendChild(el("span", {"class": "sw differs"}));
    legend.appendChild(document.createTextNode(" " + W.legend_differs));
    root.appendChild(legend);

    function label(i, axis) {
      if (D.l) { return D.l[axis === "k" ? i : Lk - Lq + i + off[2]] || String(i); }
      return String(i + (axis === "q" ? off[2] : off[3]));
    }
    function differs(a, b) {
      if (isNaN(a) || isNaN(b)) { return isNaN(a) !== isNaN(b); }
      return Math.abs(a - b) > D.t;
    }
    function table(kind, caption, rows, ref, keeps) {
      var wrap = el("div", {"class": "ex-table " + kind, role: "group", tabindex: "0", "aria-label": caption});
      var t = el("table");
      t.appendChild(el("caption", {}, caption));
      var head = el("tr"); head.appendChild(el("th", {scope: "col"}, W.corner));
      for (var k = 0; k < Lk; k++) { head.appendChild(el("th", {scope: "col"}, label(k, "k"))); }
      if (kind !== "scores") { head.appendChild(el("th", {scope: "col"}, W.sum)); }
      var thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
      var body = el("tbody");
      rows.forEach(function (row, q) {
        var tr = el("tr", {"data-q": String(q)});
        if (state.row === q) { tr.className = "current"; }
        var th = el("th", {scope: "row"});
        if (kind === "scores") {
          var btn = el("button", {type: "button", "aria-label": say("select_row", {q: label(q, "q")}),
                                  "aria-pressed": state.row === q ? "true" : "false"}, label(q, "q"));
          btn.addEventListener("click", function () { state.row = q; draw(); focusRow(q); });
          th.appendChild(btn);
        } else { th.textContent = label(q, "q"); }
        tr.appendChild(th);
        if (row === null) {
          var td = el("td", {colspan: String(Lk + 1), "class": "note"}, W.only_case);
          tr.appendChild(td);
        } else {
          var sum = 0;
          row.forEach(function (c, k) {
            var v = kind === "scores" ? c.v : c, cls = [];
            if (kind === "scores" && c.masked) { cls.push("masked"); }
            if (kind !== "scores") {
              sum += v;
              if (keeps && !keeps[q][k]) { cls.push("masked"); }
              if (v > 0.005) { cls.push("w"); }
              if (ref && differs(v, ref[q][k])) { cls.push("differs"); }
            }
            if (v !== null && isNaN(v)) { cls.push("nan"); }
            var cell = el("td", {"data-k": String(k)}, v === null ? "?" : short(v));
            if (cls.length) { cell.className = cls.join(" "); }
            if (kind !== "scores" && !isNaN(v)) {
              cell.style.backgroundColor = "rgba(30, 64, 175, " + (0.55 * Math.min(1, Math.max(0, v))).toFixed(3) + ")";
            }
            var tip = W.query + " " + label(q, "q") + ", " + W.key + " " + label(k, "k") + ": " + (v === null ? "?" : short(v));
            if (cls.indexOf("masked") >= 0) { tip += " (" + W.masked_cell + ")"; }
            if (cls.indexOf("differs") >= 0) { tip += " (" + W.differs + ")"; }
            cell.title = tip;
            tr.appendChild(cell);
          });
          if (kind !== "scores") {
            var bad = isNaN(sum) || (Math.abs(sum - 1) > 1e-3 && Math.abs(sum) > 1e-9);
            tr.appendChild(el("td", {"class": "sum" + (bad ? " bad" : "")}, short(sum) + (bad ? " ✗" : "")));
          }
        }
        body.appendChild(tr);
      });
      t.appendChild(body);
      wrap.appendChild(t);
      return wrap;
    }
    function focusRow(q) {
      var b = panels.querySelector('.ex-table.scores tr[data-q="' + q + '"] button');
      if (b) { b.focus(); }
    }

    function notes(b, h, mine, ref) {
      var out = [], r = rules[state.rule];
      for (var q = 0; q < Lq; q++) {
        var keep = keepOf(b, q, !!r.mask), refKeep = keepOf(b, q, false), s = S[b][h][q], qn = label(q, "q");
        var visible = s.filter(function (x, k) { return keep[k]; });
        var row = mine[q];
        if (!row) { continue; }
        if (!refKeep.some(function (x) { return x; })) {
          var kind = row.some(isNaN) ? "empty_nan" : row.every(function (x) { return Math.abs(x) < 1e-9; }) ? "empty_zero" : "empty_uniform";
          out.push(say(kind, {q: qn, n: Lk}));
          continue;
        }
        if (r.mask && D.m) {
          var yours = keep.filter(Boolean).length, theirs = refKeep.filter(Boolean).length;
          if (yours !== theirs) {
            out.push(say("fewer_keys", {q: qn, yours: yours, ref: theirs, last: label(refKeep.lastIndexOf(true), "k")}));
          }
          continue;
        }
        var leak = 0;
        row.forEach(function (w, k) { if (!keep[k]) { leak += w; } });
        if (!r.after && r.fill === 0 && visible.length && visible.length < Lk && Math.max.apply(null, visible) < 0) {
          out.push(say("zero_wins", {q: qn, max: short(Math.max.apply(null, visible))}));
        } else if (!r.after && leak > D.t) {
          out.push(say("fill_leaks", {q: qn, w: short(leak)}));
        } else if (r.after) {
          var sum = row.reduce(function (a, x) { return a + x; }, 0);
          if (Math.abs(sum - 1) > 1e-3) { out.push(say("after", {q: qn, sum: short(sum)})); }
        }
      }
      return out.slice(0, 3);
    }

    function bars(q, mine, ref, mineTitle) {
      detail.textContent = "";
      if (q === null || !mine || !mine[q]) { return; }
      detail.appendChild(el("h" + level, {}, say("row", {q: label(q, "q")})));
      var list = el("ul", {"class": "ex-bars"});
      var top = el("li", {"class": "head"});
      [W.key, mineTitle, "", W.reference, ""].forEach(function (t) {
        top.appendChild(el("span", {"class": "h"}, t));
      });
      list.appendChild(top);
      for (var k = 0; k < Lk; k++) {
        var li = el("li");
        li.appendChild(el("span", {"class": "k"}, label(k, "k")));
        [["yours", mine[q][k]], ["ref", ref[q][k]]].forEach(function (pair) {
          var bar = el("span", {"class": "bar " + pair[0]});
          var v = pair[1];
          bar.style.width = (isNaN(v) ? 0 : Math.max(0, Math.min(1, v)) * 100).toFixed(1) + "%";
          var box = el("span", {"class": "track"}); box.appendChild(bar);
          li.appendChild(box);
          li.appendChild(el("span", {"class": "v " + pair[0]}, short(v)));
        });
        list.appendChild(li);
      }
      detail.appendChild(list);
    }

    function draw() {
      var b = state.b, h = state.h, r = rules[state.rule];
      var scores = [], mine = [], ref = [], mineKeep = [], refKeep = [];
      for (var q = 0; q < Lq; q++) {
        mineKeep.push(keepOf(b, q, !!r.mask));
        refKeep.push(keepOf(b, q, false));
        scores.push(shownScores(b, h, q));
        mine.push(ruleRow(b, h, q));
        ref.push(referenceRow(b, h, q));
      }
      var mineTitle = r.yours && !r.mask ? W.yours : r.mask ? W.your_mask : W.rule_weights;
      panels.textContent = "";
      panels.appendChild(table("scores", W.scores + (D.i ? " (" + W.illustrative + ")" : ""), scores, null));
      panels.appendChild(table("mine", mineTitle, mine, ref, mineKeep));
      panels.appendChild(table("reference", W.reference, ref, null, refKeep));
      bars(state.row, mine, ref, mineTitle);
      var n = 0, known = true;
      mine.forEach(function (row, q) {
        if (!row) { known = false; return; }
        row.forEach(function (v, k) { if (differs(v, ref[q][k])) { n++; } });
      });
      var lines = known ? [n ? say("n_differ", {n: n}) : W.match] : [W.only_case];
      if (known) { lines = lines.concat(notes(b, h, mine, ref)); }
      status.textContent = "";
      lines.forEach(function (line) { status.appendChild(el("span", {}, line)); });
      root.setAttribute("data-differ", String(n));
    }
    // Start on the first batch row and head, and the first row, that differ, so the bars show at once.
    state.row = 0;
    outer: for (var b = 0; b < B; b++) {
      for (var h = 0; h < H; h++) {
        state.b = b; state.h = h; draw();
        if (root.getAttribute("data-differ") !== "0") { break outer; }
      }
    }
    if (root.getAttribute("data-differ") === "0") { state.b = 0; state.h = 0; }
    controls.querySelectorAll("fieldset.ex-choose").forEach(function (fs) {
      var which = fs.querySelector("button").hasAttribute("data-batch") ? state.b : state.h;
      fs.querySelectorAll("button").forEach(function (x, j) { x.setAttribute("aria-pressed", j === which ? "true" : "false"); });
    });
    draw();
    var first = panels.querySelector(".ex-table.mine td.differs");
    if (first) { state.row = Number(first.parentNode.getAttribute("data-q")); draw(); }
    root.hidden = false;
  }

  Array.prototype.forEach.call(document.querySelectorAll("section[data-explorer]"), setup);
})();
