// Open every page of the built site in a real browser and fail if anything is broken.
//
//   node scripts/check_site.mjs [_build/html]
//
// Serves the folder on 127.0.0.1 (a random free port), opens each HTML page in
// headless Chromium (Debian's /usr/bin/chromium, or $CHROMIUM), driven by
// playwright-core from npm, and fails on:
//   - any request that leaves 127.0.0.1 (the site must render offline: no CDN);
//   - any local resource that fails to load or answers with an HTTP error;
//   - any JavaScript error thrown on the page;
//   - any <img> that does not display (not loaded, or naturalWidth 0);
//   - math that did not render: a math element without MathJax output, a
//     MathJax error, or raw TeX delimiters left in the text;
//   - saved widget state that did not render into widgets;
//   - a widget that does not respond: each control (slider, menu, buttons) of each
//     widget is moved as a reader would, and the widget's picture, its controls
//     masked, must change (the site has no kernel, so a widget responds only if
//     its states are stored in it and its controls linked to them in the browser);
//   - a widget wider than the text column, a clipped label or readout, or a
//     slider track squeezed below 100 px;
//   - any link to a page or file of the site that does not exist;
//   - a chapter notebook page without its Binder, Colab, Thebe, download,
//     repository and issues buttons.
// Saves screenshots of the landing page and of the first chapter, in the
// light and the dark theme, and of every widget as it opens and (controls
// masked) after each move, under _build/screenshots/.

import { createServer } from "node:http";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { extname, join, relative, resolve, sep } from "node:path";
import { chromium } from "playwright-core";

const root = resolve(process.argv[2] ?? "_build/html");
const screenshots = resolve(root, "..", "screenshots");
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const SCREENSHOT_PAGES = ["intro.html", "chapters/intro.html", "chapters/00_a_first_look.html"];

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".svg": "image/svg+xml",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
  ".eot": "application/vnd.ms-fontobject",
  ".txt": "text/plain; charset=utf-8",
  ".ipynb": "application/json",
  ".md": "text/plain; charset=utf-8",
  ".py": "text/plain; charset=utf-8",
};

function serve(dir) {
  const server = createServer((req, res) => {
    let path = decodeURIComponent(new URL(req.url, "http://127.0.0.1").pathname);
    let file = resolve(dir, "." + path);
    if (file !== dir && !file.startsWith(dir + sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      if (statSync(file).isDirectory()) file = join(file, "index.html");
      const body = readFileSync(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end("not found");
    }
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

function pages(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      const rel = relative(dir, full);
      if (statSync(full).isDirectory()) {
        if (!["_static", "_images", "_sources", "_downloads"].includes(rel)) walk(full);
      } else if (name.endsWith(".html")) {
        out.push(rel.split(sep).join("/"));
      }
    }
  };
  walk(dir);
  return out.sort();
}

// Runs inside the page: returns a list of problems with images, math and widgets.
async function inspectPage() {
  const problems = [];

  for (const img of document.querySelectorAll("img")) {
    img.loading = "eager";
    try {
      await img.decode();
    } catch {
      // reported below
    }
    if (!img.complete || img.naturalWidth === 0) {
      problems.push(`image does not display: ${img.getAttribute("src")}`);
    }
  }

  if (window.MathJax?.startup?.promise) await window.MathJax.startup.promise;
  const maths = [...document.querySelectorAll(".math, .MathJax_Preview")];
  let rendered = 0;
  for (const el of maths) {
    const container = el.querySelector("mjx-container");
    // Text outside MathJax's output is what a reader sees raw.
    const clone = el.cloneNode(true);
    clone.querySelectorAll("mjx-container").forEach((c) => c.remove());
    const raw = clone.textContent.trim();
    if (!container) {
      problems.push(`math not rendered: ${el.textContent.trim().slice(0, 80)}`);
    } else if (el.querySelector("mjx-merror")) {
      problems.push(`MathJax error in: ${el.textContent.trim().slice(0, 80)}`);
    } else if (/\\\(|\\\)|\\\[|\\\]|\$/.test(raw)) {
      problems.push(`raw TeX left next to rendered math: ${raw.slice(0, 80)}`);
    } else {
      rendered += 1;
    }
  }

  // Dollar or backslash delimiters in prose mean the Markdown math was never converted.
  const article = document.querySelector("article") ?? document.body;
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      const skip = node.parentElement?.closest(
        "pre, code, script, style, textarea, mjx-container, .math, .highlight, .output",
      );
      return skip ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT;
    },
  });
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent;
    if (/\\\(|\\\[|\$\$|\$[^\s$][^$]*\$/.test(text)) {
      problems.push(`unrendered math delimiters in text: ${text.trim().slice(0, 80)}`);
    }
  }

  // Markers for the tools (nbval, the student-notebook generator) are never shown.
  for (const pre of document.querySelectorAll("pre")) {
    if (/NBVAL_IGNORE_OUTPUT|### (BEGIN|END) SOLUTION/.test(pre.textContent)) {
      problems.push(`a test marker is shown: ${pre.textContent.trim().slice(0, 80)}`);
    }
  }

  const widgetState = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  const widgetViews = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
  let widgets = 0;
  if (widgetState && widgetViews.length) {
    const deadline = Date.now() + 15000;
    while (Date.now() < deadline) {
      widgets = document.querySelectorAll(".jupyter-widgets, .widget-box, .lm-Widget").length;
      if (widgets > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    if (widgets === 0) problems.push(`${widgetViews.length} saved widget(s) did not render`);
  }

  const links = [...document.querySelectorAll("a[href]")]
    .map((a) => a.href)
    .filter((href) => href.startsWith(location.origin));

  return {
    problems,
    links,
    images: document.querySelectorAll("img").length,
    maths: rendered,
    widgets: widgetViews.length,
  };
}

// Runs inside the page on one widget: what a reader at this column width could not read.
function widgetLayoutProblems(root) {
  const problems = [];
  const column = root.closest(".cell_output") ?? root.parentElement;
  const overhang = root.getBoundingClientRect().right - column.getBoundingClientRect().right;
  if (overhang > 1) problems.push(`widget overhangs the text column by ${Math.round(overhang)} px`);
  for (const el of root.querySelectorAll(".widget-label, .widget-readout, button")) {
    if (el.offsetParent && el.scrollWidth > el.clientWidth + 1) {
      problems.push(`widget label clipped: "${el.textContent.trim()}"`);
    }
  }
  for (const track of root.querySelectorAll(".noUi-target")) {
    if (track.clientWidth < 100) problems.push(`slider track only ${track.clientWidth} px wide`);
  }
  return problems;
}

// Moves one control as a reader would; returns what it was.
async function moveControl(control) {
  const classes = (await control.getAttribute("class")) ?? "";
  if (classes.includes("widget-dropdown")) {
    const select = control.locator("select");
    const [current, count] = await select.evaluate((s) => [s.selectedIndex, s.options.length]);
    await select.selectOption({ index: (current + 1) % count });
    return "menu";
  }
  if (classes.includes("widget-toggle-buttons")) {
    await control.locator("button:not(.mod-active)").first().click();
    return "buttons";
  }
  const handle = control.locator(".noUi-handle").first();
  const [now, max] = await handle.evaluate((h) => [
    Number(h.getAttribute("aria-valuenow")),
    Number(h.getAttribute("aria-valuemax")),
  ]);
  await handle.focus();
  await handle.press(now < max ? "ArrowRight" : "ArrowLeft");
  return "slider";
}

// Moves every control of every rendered widget on the page, one at a time, and fails
// unless the widget's picture changes each time. The controls are masked in the
// screenshots, so a slider's own handle moving does not count as a response.
async function exerciseWidgets(page, rel) {
  const problems = [];
  let moved = 0;
  const name = rel.replace(/\//g, "_").replace(/\.html$/, "");
  const roots = page.locator(".widget-subarea > .jupyter-widgets");
  for (let i = 0; i < (await roots.count()); i++) {
    const root = roots.nth(i);
    await root.scrollIntoViewIfNeeded();
    problems.push(...(await root.evaluate(widgetLayoutProblems)).map((p) => `widget ${i + 1}: ${p}`));
    const controls = root.locator(".widget-slider, .widget-dropdown, .widget-toggle-buttons");
    const picture = (path) => root.screenshot({ path, mask: [controls], animations: "disabled" });
    await root.screenshot({ path: join(screenshots, `${name}-widget${i + 1}.png`), animations: "disabled" });
    let before = await picture();
    // Count again after each move: a menu can swap in a panel with other controls.
    for (let j = 0; j < (await controls.count()); j++) {
      const what = await moveControl(controls.nth(j));
      await page.waitForTimeout(500);
      const after = await picture(join(screenshots, `${name}-widget${i + 1}-move${j + 1}-${what}.png`));
      if (after.equals(before)) problems.push(`widget ${i + 1}: moving its ${what} changed nothing`);
      before = after;
      moved += 1;
    }
  }
  return { problems, moved };
}

// The site as a reader sees it in a desktop window (1280 x 800), every page in
// the light theme and two in the dark one: no error in the browser console (a
// missing favicon, the theme's "invalid theme mode"), no page that scrolls
// sideways, every table within the text column (a table may scroll sideways
// only on a narrower screen), one search field, and the sidebar inside the
// window. Reports, without failing, how many code cells scroll sideways.
// Uses its own browser, so that each theme starts from a first visit. Returns
// the list of problems.
async function checkReaderView(base, list) {
  const redirect = (rel) => /<meta http-equiv="refresh"/i.test(readFileSync(join(root, rel), "utf8"));
  const rels = list.filter((rel) => !redirect(rel));
  const inspect = () => {
    const out = [];
    const root = document.documentElement;
    if (root.scrollWidth > root.clientWidth + 1) {
      out.push(`the page scrolls sideways: ${root.scrollWidth} px in a ${root.clientWidth} px window`);
    }
    const article = document.querySelector("article.bd-article");
    const right = article ? article.getBoundingClientRect().right : root.clientWidth;
    for (const table of document.querySelectorAll("article table")) {
      const over = table.getBoundingClientRect().right - right;
      if (over > 1) {
        const head = table.querySelector("th, td")?.textContent.trim().slice(0, 40);
        out.push(`a table (first cell "${head}") is ${Math.round(over)} px wider than the column`);
      }
    }
    const searches = [...document.querySelectorAll(".search-button-field")];
    const shown = searches.filter((el) => el.getClientRects().length > 0).length;
    if (shown > 1) out.push(`${shown} search fields are shown`);
    const sidebar = document.querySelector(".bd-sidebar-primary");
    if (sidebar && sidebar.getClientRects().length > 0) {
      const below = sidebar.getBoundingClientRect().bottom - window.innerHeight;
      if (below > 1) out.push(`the sidebar ends ${Math.round(below)} px below the window`);
      const scrolls = /auto|scroll/.test(getComputedStyle(sidebar).overflowY);
      if (sidebar.scrollHeight > sidebar.clientHeight + 1 && !scrolls) {
        out.push("the sidebar is cut off: its contents are taller than it and it does not scroll");
      }
    }
    const pres = [...document.querySelectorAll("div.cell_input pre")];
    const wide = pres.filter((pre) => pre.scrollWidth > pre.clientWidth + 1).length;
    return { problems: out, cells: pres.length, wide, theme: root.dataset.theme };
  };

  const dark = ["chapters/intro.html", "chapters/11_real_engines.html"];
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu"],
  });
  const problems = [];
  let cells = 0;
  let wide = 0;
  try {
    for (const theme of ["light", "dark"]) {
      // Light is a first visit with nothing stored (headless Chromium prefers light).
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      if (theme === "dark") await context.addInitScript(() => localStorage.setItem("mode", "dark"));
      try {
        for (const rel of theme === "dark" ? dark : rels) {
          const page = await context.newPage();
          const errors = [];
          page.on("console", (msg) => {
            if (msg.type() === "error") errors.push(msg.text());
          });
          await page.goto(base + rel, { waitUntil: "load", timeout: 60000 });
          await page.waitForTimeout(200);
          const found = await page.evaluate(inspect);
          if (found.theme !== theme) {
            found.problems.push(`the ${theme} theme did not apply (${found.theme})`);
          }
          for (const e of errors) found.problems.push(`console error: ${e}`);
          for (const p of found.problems) problems.push(`${rel} (${theme}, 1280 px): ${p}`);
          if (theme === "light") {
            cells += found.cells;
            wide += found.wide;
          }
          await page.close();
        }
      } finally {
        await context.close();
      }
    }
  } finally {
    await browser.close();
  }
  console.log(
    `reader's view at 1280 px: ${rels.length} pages, ${problems.length} problem(s); ` +
      `${wide} of ${cells} code cells scroll sideways`,
  );
  for (const p of problems) console.log(`       ${p}`);
  return problems;
}

async function main() {
  const list = pages(root);
  if (list.length === 0) throw new Error(`no HTML pages under ${root}: build the book first`);
  const server = await serve(root);
  const base = `http://127.0.0.1:${server.address().port}/`;
  const profile = mkdtempSync(join(tmpdir(), "specdec-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  mkdirSync(screenshots, { recursive: true });

  const failures = [];
  const totals = { pages: 0, images: 0, maths: 0, widgets: 0, controls: 0, requests: 0 };
  try {
    for (const rel of list) {
      const html = readFileSync(join(root, rel), "utf8");
      const refresh = html.match(/<meta http-equiv="refresh" content="\d+;\s*url=([^"]+)"/i);
      if (refresh) {
        // A redirect page (the site's index.html): its target must exist.
        const target = resolve(join(root, rel, ".."), refresh[1].split("#")[0]);
        const ok = target.startsWith(root) && statSync(target, { throwIfNoEntry: false })?.isFile();
        console.log(`${ok ? "ok  " : "FAIL"} ${rel}  (redirect to ${refresh[1]})`);
        if (!ok) failures.push(`${rel}: redirect target ${refresh[1]} does not exist`);
        totals.pages += 1;
        continue;
      }
      const page = await context.newPage();
      const problems = [];
      await page.route("**/*", (route) => {
        const url = route.request().url();
        if (url.startsWith(base) || url.startsWith("data:") || url.startsWith("blob:")) {
          totals.requests += 1;
          return route.continue();
        }
        problems.push(`request leaves localhost: ${url}`);
        return route.abort("blockedbyclient");
      });
      page.on("requestfailed", (req) => {
        if (req.url().startsWith(base)) {
          problems.push(`failed to load ${req.url().slice(base.length)}: ${req.failure()?.errorText}`);
        }
      });
      page.on("response", (resp) => {
        if (resp.status() >= 400) problems.push(`HTTP ${resp.status()} for ${resp.url().replace(base, "")}`);
      });
      page.on("pageerror", (err) => problems.push(`JavaScript error: ${err.message}`));

      await page.goto(base + rel, { waitUntil: "load", timeout: 60000 });
      const result = await page.evaluate(inspectPage);
      await page.waitForLoadState("networkidle", { timeout: 15000 }).catch(() => {});
      problems.push(...result.problems);
      if (result.widgets > 0) {
        const exercised = await exerciseWidgets(page, rel);
        problems.push(...exercised.problems);
        totals.controls += exercised.moved;
      }
      for (const href of new Set(result.links)) {
        const path = decodeURIComponent(new URL(href).pathname);
        let file = resolve(root, "." + path);
        if (statSync(file, { throwIfNoEntry: false })?.isDirectory()) file = join(file, "index.html");
        if (!statSync(file, { throwIfNoEntry: false })?.isFile()) {
          problems.push(`link to a missing page or file: ${path}`);
        }
      }
      if (/_sources\/[^"]+\.ipynb"/.test(html)) {
        // A chapter notebook: its launch and download buttons must be there.
        for (const [what, pattern] of [
          ["Binder launch button", /href="https:\/\/mybinder\.org\/v2\/gh\//],
          ["Colab launch button", /href="https:\/\/colab\.research\.google\.com\/github\//],
          ["Thebe (live code) button", /btn-launch-thebe/],
          ["notebook download button", /href="[^"]*_sources\/[^"]+\.ipynb"/],
          ["repository button", /class="[^"]*fa-github/],
          ["issues button", /\/issues\/new\?/],
        ]) {
          if (!pattern.test(html)) problems.push(`missing ${what}`);
        }
      }
      totals.pages += 1;
      totals.images += result.images;
      totals.maths += result.maths;
      totals.widgets += result.widgets;

      if (SCREENSHOT_PAGES.includes(rel)) {
        const name = rel.replace(/\//g, "_").replace(/\.html$/, "");
        await page.screenshot({ path: join(screenshots, `${name}-light.png`), fullPage: true });
        await page.evaluate(() => document.documentElement.setAttribute("data-theme", "dark"));
        await page.waitForTimeout(300);
        await page.screenshot({ path: join(screenshots, `${name}-dark.png`), fullPage: true });
      }

      const status = problems.length ? "FAIL" : "ok  ";
      console.log(
        `${status} ${rel}  (${result.images} images, ${result.maths} math, ${result.widgets} widgets)`,
      );
      for (const p of problems) {
        console.log(`       ${p}`);
        failures.push(`${rel}: ${p}`);
      }
      await page.close();
    }
    failures.push(...(await checkReaderView(base, list)));
  } finally {
    await context.close();
    server.close();
    rmSync(profile, { recursive: true, force: true });
  }

  console.log(
    `\nbrowser check: ${totals.pages} pages, ${totals.images} images, ${totals.maths} rendered math ` +
      `elements, ${totals.widgets} widgets (${totals.controls} of their controls moved), ` +
      `${totals.requests} local requests; screenshots in ${screenshots}`,
  );
  if (failures.length) {
    console.log(`browser check FAILED: ${failures.length} problem(s)`);
    process.exit(1);
  }
  console.log("browser check passed: every page rendered with no network");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
