#!/usr/bin/env node
// Builds the app (unless --no-build) and fails when the JavaScript a first visit must load, the entry
// chunk plus everything it imports statically, exceeds the budget in gzip bytes. Lazy chunks don't count.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const BUDGET_BYTES = 300 * 1024;
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

if (!process.argv.includes('--no-build')) {
  execFileSync('npx', ['vite', 'build', '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' });
}

const manifest = JSON.parse(readFileSync(join(dist, '.vite', 'manifest.json'), 'utf8'));
const entries = Object.entries(manifest).filter(([, chunk]) => chunk.isEntry);
if (entries.length === 0) {
  console.error('size: no entry chunk in the manifest');
  process.exit(1);
}

const seen = new Set();
const initial = [];
function visit(key) {
  if (seen.has(key)) return;
  seen.add(key);
  const chunk = manifest[key];
  initial.push(chunk);
  for (const dep of chunk.imports ?? []) visit(dep);
}
for (const [key] of entries) visit(key);

const gz = (file) => gzipSync(readFileSync(join(dist, file)), { level: 9 }).length;
let jsTotal = 0;
const css = new Set();
for (const chunk of initial) {
  const size = gz(chunk.file);
  jsTotal += size;
  console.log(`  ${(size / 1024).toFixed(1).padStart(7)} KB gz  ${chunk.file}`);
  for (const c of chunk.css ?? []) css.add(c);
}
const cssTotal = [...css].reduce((sum, f) => sum + gz(f), 0);
const lazyCount = Object.values(manifest).filter((c) => c.isDynamicEntry).length;
console.log(`size: initial JS ${(jsTotal / 1024).toFixed(1)} KB gzip (budget ${BUDGET_BYTES / 1024} KB), ` +
  `initial CSS ${(cssTotal / 1024).toFixed(1)} KB gzip, ${lazyCount} lazy chunks`);
if (jsTotal > BUDGET_BYTES) {
  console.error('size: FAILED, initial JavaScript is over budget');
  process.exit(1);
}
console.log('size: OK');
