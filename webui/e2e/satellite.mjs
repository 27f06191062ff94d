/* global document, getComputedStyle -- used inside functions that run in the page */
// The satellite leg as the operator sees it (docs/webui.md): each flow's congestion control, why and its
// retransmissions in the Flows table (fitting at 1280 px), the drill-down's retransmissions per sample, the
// Overview's rate over time and split by congestion control and reason, and the BoD page's recommendation as the API
// derives it. Against the fake gateway, whose flows run hybla_ld (default), bbr (class) and bbr (automatic).
import assert from 'node:assert/strict';
import { join } from 'node:path';

export async function satelliteSteps(steps, { page, baseUrl, shotsDir }) {
  const heading = (name) => page.getByRole('heading', { level: 2, name, exact: true });
  const gotoNav = async (name) => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name, exact: true }).click();
    await heading(name).waitFor();
  };
  const shot = async (name) => {
    if (shotsDir) await page.screenshot({ path: join(shotsDir, `${name}.png`), fullPage: true });
  };
  const api = async (path) => {
    const r = await page.request.get(`${baseUrl}${path}`);
    assert.equal(r.status(), 200, `${path}: ${r.status()}`);
    return r.json();
  };

  await steps.run('satellite leg: the Flows table shows each leg, and fits 1280 px', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await gotoNav('Flows');
    const table = page.getByRole('table', { name: 'Flows' });
    await table.getByRole('columnheader', { name: /Sat CC/ }).waitFor();
    const row = table.getByRole('row').filter({ hasText: 'hybla_ld' }).first();
    await row.waitFor();
    await row.getByText('default', { exact: true }).waitFor();
    await table.getByRole('row').filter({ hasText: 'bbr' }).filter({ hasText: 'auto' }).first().waitFor();
    await table.getByRole('row').filter({ hasText: 'bbr' }).filter({ hasText: 'class' }).first().waitFor();
    // Nothing cut: the table is no wider than its box, and no text in a cell (an address, a badge, a byte count, the
    // RTT, the satellite leg) is wider than the box that clips it (measured on the laid-out text, to the sub-pixel).
    const clipped = await page.evaluate(() => {
      const t = document.querySelector('[role="table"][aria-label="Flows"]');
      const out = [];
      if (t.scrollWidth > t.clientWidth) out.push(`table ${t.scrollWidth} > ${t.clientWidth}`);
      const cut = (el) => {
        const range = document.createRange();
        range.selectNodeContents(el);
        const cs = getComputedStyle(el);
        const box = el.getBoundingClientRect().width - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
        return range.getBoundingClientRect().width > box + 0.5;
      };
      for (const r of [...t.querySelectorAll('[role="row"]')].slice(0, 15)) {
        for (const el of r.querySelectorAll('[role="cell"], [role="cell"] *')) {
          if (el.offsetParent === null || getComputedStyle(el).overflow === 'visible') continue;
          if (cut(el)) out.push(`'${el.textContent}'`);
        }
      }
      return out;
    });
    assert.deepEqual(clipped, [], `clipped at 1280 px: ${clipped.join('; ')}`);
  });

  await steps.run('satellite leg: the drill-down rates the retransmissions between samples', async () => {
    const link = page.getByRole('table', { name: 'Flows' }).getByRole('row').filter({ hasText: 'hybla_ld' }).first().getByRole('link');
    await link.click();
    await page.locator('#sat-leg-cc').filter({ hasText: /Satellite leg runs hybla_ld/ }).waitFor();
    await page.locator('#sat-leg-cc').filter({ hasText: /retransmitted: [\d,]+ of [\d,]+ segments/ }).waitFor();
    const chart = page.getByRole('region', { name: 'Satellite retransmissions' });
    await chart.getByRole('img', { name: /retransmitted between successive samples/ }).waitFor();
    // Three samples make two intervals with a rate each.
    await page.getByText(/^([3-9]|\d{2,}) live samples/).waitFor({ timeout: 15000 });
    await chart.locator('.recharts-line-curve').first().waitFor();
  });

  await steps.run('satellite leg: the Overview shows the retransmission rate over time and the split by congestion control', async () => {
    // The collector stores the rate per congestion control; the API's series sums them.
    let series = null;
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      series = await api(`/api/v1/stats/series?metric=sat_retrans_pct&start=${Math.floor(Date.now() / 1000) - 600}`);
      if ((series.series.find((s) => s.key === 'all')?.points.length ?? 0) >= 3) break;
      await page.waitForTimeout(1000);
    }
    const keys = series.series.map((s) => s.key).sort();
    assert.deepEqual(keys, ['all', 'bbr', 'hybla_ld'], JSON.stringify(keys));
    assert.ok(series.series.every((s) => s.points.every((p) => p.avg >= 0 && p.avg < 10)), 'rates between 0 and 10 %');
    await gotoNav('Overview');
    const split = page.getByRole('table', { name: 'Flows by satellite congestion control' });
    const rowOf = (cc) => split.getByRole('row').filter({ has: page.getByRole('cell', { name: cc, exact: true }) });
    await rowOf('hybla_ld').getByText(/^\d+ default$/).waitFor();
    await rowOf('bbr').getByText(/^\d+ auto$/).waitFor();
    await rowOf('bbr').getByText(/^\d+ class$/).waitFor();
    await rowOf('hybla_ld').getByText(/^\d+\.\d+ %$/).waitFor();
    const chart = page.getByRole('region', { name: 'Satellite leg retransmissions' });
    await chart.locator('.recharts-line-curve').first().waitFor();
    await page.waitForTimeout(400);
    await shot('overview');
  });

  await steps.run("BoD: the recommended congestion control is the API's, with its derivation", async () => {
    await gotoNav('BoD tuning');
    const [profile] = await api('/api/v1/bod/profiles');
    const cc = profile.tuning.congestion_control;
    const why = page.locator('#bod-cc-why');
    await why.filter({ hasText: `Satellite congestion control: ${cc.value}.` }).waitFor();
    assert.equal((await why.textContent()).replace(/\s+/g, ' ').trim(), `Satellite congestion control: ${cc.value}. ${cc.derivation}`.replace(/\s+/g, ' '));
  });
}
