// Applies the saved theme before the first paint, so a dark-theme operator never sees a flash.
// A classic script (not the module bundle) so that it runs before the page is drawn.
(function () {
  var t = localStorage.getItem("tradeops.theme");
  if (t !== "dark" && t !== "light") t = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = t;
})();
