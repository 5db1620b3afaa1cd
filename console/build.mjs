// Builds the console into dist/: index.html, app.js and app.css, minified, with no hashes in
// the names (the server embeds them and sets the cache headers). The output is committed and
// CI rebuilds it to check it is up to date, so the build must be deterministic.
//
//   node build.mjs            build once
//   node build.mjs --outdir DIR   build elsewhere (for working on the console beside others)
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const i = process.argv.indexOf("--outdir");
const outdir = i > 0 ? process.argv[i + 1] : "dist";
mkdirSync(outdir, { recursive: true });

await esbuild.build({
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["chrome110", "firefox115", "safari16"],
  jsx: "automatic",
  jsxImportSource: "preact",
  outdir,
  legalComments: "eof",
  logLevel: "warning",
  loader: { ".css": "css" },
});
copyFileSync("src/index.html", `${outdir}/index.html`);
copyFileSync("src/theme.js", `${outdir}/theme.js`);
