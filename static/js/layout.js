// The section navigation folds behind a "Menu" button on narrow screens. Without this script the button
// stays hidden and the navigation stays open, so every section is reachable either way.
(function () {
  "use strict";

  const button = document.querySelector(".nav-toggle");
  const nav = document.getElementById("sidenav");
  if (!button || !nav) return;
  const narrow = window.matchMedia("(max-width: 800px)");

  function set(open) {
    button.setAttribute("aria-expanded", String(open));
    nav.classList.toggle("is-collapsed", !open);
  }

  function fit() {
    // Wide screens always show the navigation; narrow ones start with it folded.
    button.hidden = !narrow.matches;
    set(!narrow.matches);
  }

  button.addEventListener("click", function () {
    set(button.getAttribute("aria-expanded") !== "true");
  });
  narrow.addEventListener("change", fit);
  fit();
})();

// A box that scrolls sideways (a wide table on a phone) must be reachable with the keyboard: one that
// holds nothing focusable is made focusable itself, for as long as it scrolls.
(function () {
  "use strict";

  function scrollers() {
    document.querySelectorAll("main .table, main .table-wrap, main pre").forEach(function (box) {
      const scrolls = box.scrollWidth > box.clientWidth + 1;
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        box.dataset.scrollFocus = "";
      } else if (!scrolls && box.dataset.scrollFocus !== undefined) {
        box.removeAttribute("tabindex");
        delete box.dataset.scrollFocus;
      }
    });
  }

  let pending = 0;
  window.addEventListener("resize", function () {
    window.clearTimeout(pending);
    pending = window.setTimeout(scrollers, 150);
  });
  scrollers();
})();
