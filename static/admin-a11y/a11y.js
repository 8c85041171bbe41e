// Accessibility repairs of Django's admin widgets (templates/admin/base_site.html), checked by
// axe in tests/ui/test_accessibility.py. The two-list selector of filter_horizontal
// (SelectFilter2.js, drawn on window load) names its filter icon with an aria-label on a span
// of no role, which assistive technology may ignore: as an image, the label is its name.
window.addEventListener("load", () => {
  // After every load listener: the form's own scripts register theirs after this one.
  setTimeout(() => {
    for (const icon of document.querySelectorAll(".search-label-icon[aria-label]:not([role])")) {
      icon.setAttribute("role", "img");
    }
  });
});
