// What a projector shows wrongly, in words (tests/browser_layout.py explains each check). Runs in the page.
() => {
  const vis = e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  };
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
  const keyOf = e => (e.closest("[class*='st-key-']")?.className.match(/st-key-[\w-]+/) || ["?"])[0];
  const main = document.querySelector("[data-testid='stMain']");
  const problems = [];

  // two leaf elements of the main area that overlap
  const leaves = [...main.querySelectorAll("[data-testid='stElementContainer']")]
    .filter(e => vis(e) && !e.querySelector("[data-testid='stElementContainer']"));
  const name = e => {
    const kind = (e.className.match(/st-key-[\w-]+/) || [e.querySelector("[data-testid]")?.dataset.testid || "?"])[0];
    return `${kind} '${(e.innerText || "").slice(0, 30).replace(/\n/g, " ")}'`;
  };
  const boxes = leaves.map(e => e.getBoundingClientRect());
  for (let i = 0; i < leaves.length; i++) {
    for (let j = i + 1; j < leaves.length; j++) {
      if (overlap(boxes[i], boxes[j])) problems.push(`overlap: ${name(leaves[i])} and ${name(leaves[j])}`);
    }
    if (boxes[i].right > window.innerWidth + 1) problems.push(`wider than the window: ${name(leaves[i])}`);
  }

  // charts: legend, title, annotations inside the chart; no text on other text
  const TEXTS = [["x tick", ".xtick text"], ["y tick", ".ytick text"], ["x title", ".g-xtitle"],
                 ["y title", ".g-ytitle"], ["legend", ".legend .traces"], ["annotation", ".annotation"],
                 ["title", ".g-gtitle"], ["button", ".updatemenu-button"]];
  for (const chart of main.querySelectorAll(".js-plotly-plot")) {
    if (!vis(chart)) continue;
    const frame = chart.getBoundingClientRect(), key = keyOf(chart);
    for (const e of chart.querySelectorAll(".legend, .g-gtitle, .annotation")) {
      const r = e.getBoundingClientRect();
      if (r.width && (r.left < frame.left - 2 || r.right > frame.right + 2 || r.top < frame.top - 2
                      || r.bottom > frame.bottom + 2)) {
        problems.push(`outside its chart ${key}: ${e.getAttribute("class")} '${(e.textContent || "").slice(0, 40)}'`);
      }
    }
    const parts = [];
    for (const [kind, q] of TEXTS) {
      for (const e of chart.querySelectorAll(q)) {
        const r = e.getBoundingClientRect();
        if (r.width > 0 && r.height > 0 && (kind === "legend" || (e.textContent || "").length)) {
          parts.push([kind, r, (e.textContent || "").slice(0, 25)]);
        }
      }
    }
    for (let i = 0; i < parts.length; i++) {
      for (let j = i + 1; j < parts.length; j++) {
        const [ka, a, ta] = parts[i], [kb, b, tb] = parts[j];
        if (ka === kb && ["x tick", "y tick", "legend"].includes(ka)) continue;
        if (overlap(a, b)) problems.push(`text on text in ${key}: ${ka} '${ta}' and ${kb} '${tb}'`);
      }
    }
  }

  // cut text: labels, metrics, selected options, tabs, buttons, paragraphs; inputs whose value does not fit
  const TEXT = ["[data-testid='stWidgetLabel']", "[data-testid='stMetricLabel']", "[data-testid='stMetricValue']",
                "[data-baseweb='select'] [title]", "[data-baseweb='select'] div[value]", "[data-testid='stTab']",
                "button p", "[data-testid='stMarkdownContainer'] p"].join(", ");
  for (const e of main.querySelectorAll(TEXT)) {
    if (!vis(e)) continue;
    const cut = [e, ...e.querySelectorAll("*")].find(x => x.scrollWidth > x.clientWidth + 1
                                                         && getComputedStyle(x).overflowX !== "visible");
    if (cut) problems.push(`cut: ${e.dataset.testid || e.tagName} '${(e.innerText || "").slice(0, 40)}'`);
  }
  for (const e of main.querySelectorAll("input[type=text], input[type=number], input:not([type])")) {
    if (vis(e) && e.scrollWidth > e.clientWidth + 1) problems.push(`input cut: ${e.ariaLabel} = ${e.value}`);
  }
  return problems;
}
