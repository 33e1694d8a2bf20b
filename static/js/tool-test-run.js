// Test-run pages of custom tools and credentialed CLIs: a run may take up to the tool's timeout, so the
// form shows that it is at work ([data-run-busy], the button's data-busy text) and cannot be sent twice.
// Without this script the form is sent as it is and the page answers when the run is over.
(function () {
  "use strict";

  document.querySelectorAll("form[data-run-form]").forEach(function (form) {
    form.addEventListener("submit", function () {
      const button = form.querySelector('button[type="submit"]');
      const busy = form.querySelector("[data-run-busy]");
      if (busy) busy.hidden = false;
      form.setAttribute("aria-busy", "true");
      if (!button) return;
      button.textContent = form.dataset.busy || "Running…";
      // After the submission has started: a disabled button would not be sent.
      window.setTimeout(function () { button.disabled = true; }, 0);
    });
  });
})();
