// Helpers the case panels share: elements, money and address formats, copy and explorer links.

export function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function button(cls, text, title) {
  const b = h("button", cls, text);
  b.type = "button";
  if (title) b.title = title;
  return b;
}

// "1 flow", "3 flows", "1 address", "2 addresses".
export function plural(n, noun, many = noun + "s") {
  return `${n} ${Number(n) === 1 ? noun : many}`;
}

export function money(usd) {
  if (usd === null || usd === undefined || usd === "") return "";
  const v = Number(usd);
  if (!Number.isFinite(v)) return String(usd);
  return "$" + v.toLocaleString("en-US", { maximumFractionDigits: v >= 100 ? 0 : 2 });
}

export function compactUsd(usd) {
  if (usd === null || usd === undefined || usd === "") return "";
  const v = Number(usd);
  if (!Number.isFinite(v)) return String(usd);
  for (const [size, s] of [[1e9, "B"], [1e6, "M"], [1e3, "K"]]) {
    if (Math.abs(v) >= size) return "$" + (v / size).toFixed(1).replace(/\.0$/, "") + s;
  }
  return "$" + v.toFixed(0);
}

export function shortAddress(address) {
  const a = String(address ?? "");
  return a.length > 14 ? a.slice(0, 6) + "…" + a.slice(-4) : a;
}

export function day(time) {
  const t = String(time ?? "");
  return /^\d{4}-\d\d-\d\d/.test(t) ? t.slice(0, 10) : t;
}

export function when(time) {
  const t = String(time ?? "");
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(t) ? t.slice(0, 16).replace("T", " ") : t;
}

// Copy to the clipboard; where the page may not (an insecure origin), select the text instead.
export function copyButton(text, label = "copy") {
  const b = button("txp-copy", label, "Copy " + shortAddress(text));
  b.addEventListener("click", (ev) => {
    ev.stopPropagation();
    const done = () => { b.textContent = "copied"; setTimeout(() => { b.textContent = label; }, 1200); };
    const fallback = () => {
      const area = document.body.appendChild(h("textarea", null, text));
      area.select();
      try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
      area.remove();
      done();
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  });
  return b;
}

export function explorerLink(url, text = "explorer ↗") {
  if (!url || !/^https:\/\//.test(String(url))) return null;
  const a = h("a", "txp-link", text);
  a.href = url;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  return a;
}
