// A few line icons, drawn as SVG elements (no icon font, nothing inline for the CSP to refuse).
const PATHS = {
  pencil: ["M4 20h4L19 9l-4-4L4 16v4z", "M13.5 6.5l4 4"],
  trash: ["M4 7h16", "M10 11v6", "M14 11v6", "M6 7l1 13h10l1-13", "M9 7V4h6v3"],
  chat: ["M4 5h16v11H9l-5 4V5z"],
  paperclip: ["M20 11.5l-8.2 8.2a5 5 0 0 1-7.1-7.1l8.5-8.5a3.3 3.3 0 0 1 4.7 4.7l-8.5 8.5a1.7 1.7 0 0 1-2.4-2.4l7.8-7.8"],
  close: ["M6 6l12 12", "M18 6L6 18"],
  download: ["M12 4v11", "M7 10l5 5 5-5", "M5 20h14"],
  more: ["M5 12h.01", "M12 12h.01", "M19 12h.01"],
  pin: ["M9 4h6", "M10 4v5l-3 4h10l-3-4V4", "M12 13v7"],
  archive: ["M4 5h16v4H4z", "M5 9v10h14V9", "M10 13h4"],
  thumbUp: ["M7 10v10H4V10h3z", "M7 10l4-7c1.5 0 2.5 1 2 3l-1 3h6c1.2 0 2 1 1.8 2.2l-1.3 6.5c-.2 1-1 1.3-2 1.3H7"],
  thumbDown: ["M17 14V4h3v10h-3z", "M17 14l-4 7c-1.5 0-2.5-1-2-3l1-3H6c-1.2 0-2-1-1.8-2.2l1.3-6.5c.2-1 1-1.3 2-1.3h9.5"],
};

export function icon(name, className = "icon") {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", className);
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  for (const d of PATHS[name] || []) {
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d);
    svg.append(path);
  }
  return svg;
}
