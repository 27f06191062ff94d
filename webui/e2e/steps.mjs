// A tiny sequential test runner: each step is named, timed and reported; the first failure stops the
// rest (they depend on each other) and they count as failed, unless the failed step was run with
// { soft: true } (later steps do not depend on it). Ends with "N passed, N failed".
export class Steps {
  constructor() {
    this.results = [];
    /** Called with the step name after a failure (e.g. to save a screenshot). */
    this.onFailure = null;
  }

  async run(name, fn, { soft = false } = {}) {
    if (this.results.some((r) => !r.ok && !r.soft)) {
      this.results.push({ name, ok: false, skipped: true });
      console.log(`  - ${name} (not run: an earlier step failed)`);
      return;
    }
    const t0 = Date.now();
    try {
      await fn();
      this.results.push({ name, ok: true });
      console.log(`  ✓ ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      this.results.push({ name, ok: false, error: e, soft });
      console.log(`  ✗ ${name} (${Date.now() - t0} ms)\n    ${String(e?.stack ?? e).split('\n').slice(0, 6).join('\n    ')}`);
      await this.onFailure?.(name).catch(() => {});
    }
  }

  summary() {
    const passed = this.results.filter((r) => r.ok).length;
    const failed = this.results.length - passed;
    for (const r of this.results.filter((x) => !x.ok && !x.skipped)) console.log(`e2e: FAILED: ${r.name}`);
    console.log(`e2e: ${passed} passed, ${failed} failed`);
    return failed === 0 && passed > 0;
  }
}
