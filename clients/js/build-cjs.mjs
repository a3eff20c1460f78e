// build-cjs.mjs writes rtlab.cjs, the CommonJS form of rtlab.js (the same code, its exports
// as module.exports), for projects that require() the package. With --check it only says
// whether rtlab.cjs is current (exit 1 if not).
import { readFileSync, writeFileSync } from 'node:fs';

const src = readFileSync(new URL('./rtlab.js', import.meta.url), 'utf8');
const names = [];
const body = src.replace(/^export (class|function|const) (\w+)/gm, (_, kind, name) => {
  names.push(name);
  return `${kind} ${name}`;
});
const out = `// Generated from rtlab.js by build-cjs.mjs: edit rtlab.js, then run node build-cjs.mjs.\n'use strict';\n\n${body}\nmodule.exports = { ${names.join(', ')} };\n`;
const file = new URL('./rtlab.cjs', import.meta.url);
if (process.argv.includes('--check')) {
  let have = '';
  try { have = readFileSync(file, 'utf8'); } catch { /* missing */ }
  if (have !== out) {
    console.error('rtlab.cjs is not current: run node build-cjs.mjs');
    process.exit(1);
  }
} else {
  writeFileSync(file, out);
}
