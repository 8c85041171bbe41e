// The demo model's banner: unfolded on wide screens, one line on a phone (its details a tap
// away), and gone for good once dismissed (remembered in this browser).
const DISMISSED_KEY = "agentsite.demoBannerDismissed";
const WIDE = "(min-width: 761px)"; // the phone layout of app.css ends at 760px

function remembered() {
  try {
    return window.localStorage.getItem(DISMISSED_KEY) === "1";
  } catch {
    return false; // storage refused (private mode): the banner just comes back next time
  }
}

export function setUpDemoBanner() {
  const banner = document.getElementById("demo-banner");
  if (!banner) return;
  if (remembered()) {
    banner.remove();
    return;
  }
  banner.hidden = false;
  document.getElementById("demo-details").open = window.matchMedia(WIDE).matches;
  document.getElementById("demo-banner-close").addEventListener("click", () => {
    banner.remove();
    try {
      window.localStorage.setItem(DISMISSED_KEY, "1");
    } catch {
      // dismissed for this page only
    }
  });
}
