import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import BodPage from './BodPage';

const derived = (value: number, unit: string, derivation = 'x', overridable = true) => ({ value, computed: value, unit, derivation, overridden: false, overridable });
const TERMINAL_SHAPING = 'terminal: pacing_return = min(CRA + RBDC max, modem buffer drain) = 5,000,000 bit/s (the top of the grant, not CRA)';

const DERIVE = {
  values: {
    sndbuf_bytes: derived(4_000_000, 'bytes'),
    rcvbuf_bytes: derived(4_000_000, 'bytes'),
    pacing_rate_bps: derived(20_000_000, 'bit/s'),
    initcwnd: derived(10, 'segments'),
    initrwnd: derived(10, 'segments'),
    hybla_base_rtt_ms: derived(600, 'ms'),
    hybla_cwnd_max: derived(2000, 'segments'),
    shaping_rate_bps: derived(5_000_000, 'bit/s', TERMINAL_SHAPING),
    shaping_overhead_bytes: derived(12, 'bytes', 'modem framing per packet = 12 B', false),
  },
  warnings: [],
  congestion_control: { value: 'hybla', derivation: 'no bit errors (BER 0): hybla, the paper\'s algorithm' },
};
const CONFIG = {
  satellite: { pacing_rate_bps: 0, congestion_control: 'hybla' },
  hybla: { base_rtt_ms: 25, cwnd_max: 1000 },
  shaping: { enabled: false, rate_bps: 0, overhead_bytes: 0, queue_packets: 1000 },
};

/** What the API's derive answers: the values, nothing the config refuses, and the changes writing them makes. */
function deriveOut(d: typeof DERIVE) {
  const v = (k: keyof typeof DERIVE.values) => d.values[k].value;
  const next: [string, unknown, unknown][] = [
    ['satellite.congestion_control', CONFIG.satellite.congestion_control, d.congestion_control.value],
    ['satellite.pacing_rate_bps', CONFIG.satellite.pacing_rate_bps, v('pacing_rate_bps')],
    ['hybla.base_rtt_ms', CONFIG.hybla.base_rtt_ms, v('hybla_base_rtt_ms')],
    ['hybla.cwnd_max', CONFIG.hybla.cwnd_max, v('hybla_cwnd_max')],
    ['shaping.enabled', CONFIG.shaping.enabled, v('shaping_rate_bps') > 0],
    ['shaping.rate_bps', CONFIG.shaping.rate_bps, v('shaping_rate_bps')],
    ['shaping.overhead_bytes', CONFIG.shaping.overhead_bytes, v('shaping_overhead_bytes')],
  ];
  const config_changes = next.filter(([, a, b]) => a !== b).map(([path, old, now]) => ({ path: `$.${path}`, op: 'changed', old, new: now }));
  return { ...d, config_problems: [], link_risks: [], config_changes };
}
const LOSSY_WHY = "BER 1e-06 loses 1.2% of frames; Hybla's window under that loss, rho × sqrt(3 / 2p) = 268 segments, is below the pipe's 2,590";

function profileOut(id: number, name: string, role: 'hub' | 'terminal' = 'hub') {
  const inputs = { forward_rate_bps: 20_000_000, return_cra_bps: 1_000_000, return_rbdc_max_bps: 4_000_000, superframe_ms: 26.5, allocation_delay_ms: 250, base_rtt_ms: 600, terminal_buffer_bytes: 262_144, mss_bytes: 1448, modem_overhead_bytes: 12, role };
  return { id, name, inputs, overrides: {}, tuning: {}, created_at: 0, updated_at: 0 };
}

/** What a write to config answers: version `id`, made from version 3 (what runs). */
const written = (id: number) => ({ version_id: id, issues: [], changed: true, base_version_id: 3, changes: [], preview: false });
const applied = (id: number) => () => jsonResponse({ ok: true, version_id: id, active_version_id: id, revision: `v${id}`, error: null, gateways: [] });
// The gateway runs version 3; version 4 is saved, not applied.
const appliesAndRunning = {
  'GET /api/v1/config/running': () =>
    jsonResponse({ reachable: true, revision: 'v3', config: null, version_id: 3, desired_version_id: 4, in_sync: false, changes: [], checked_at: 1, error: null, needs_setup: false }),
  'POST /api/v1/versions/7/apply': applied(7),
  'POST /api/v1/versions/8/apply': applied(8),
  'POST /api/v1/versions/9/apply': applied(9),
};

/** A stateful fake of the BoD endpoints: profiles created by POST show up in the next GET. A
 * derive request with a bit error rate gets the loss-differentiating choice. */
function bodApi(initial: ReturnType<typeof profileOut>[]) {
  const profiles = [...initial];
  return mockApi({
    'GET /api/v1/bod/profiles': () => jsonResponse(profiles),
    'POST /api/v1/bod/derive': (_req, body) =>
      jsonResponse(deriveOut((body as { inputs: { ber?: number } }).inputs.ber ? { ...DERIVE, congestion_control: { value: 'hybla_ld', derivation: LOSSY_WHY } } : DERIVE)),
    'GET /api/v1/config': () => jsonResponse({ version_id: 1, config: CONFIG }),
    'GET /api/v1/versions': () => jsonResponse({ versions: [], total: 1, active_version_id: 1, latest_version_id: 1 }),
    'POST /api/v1/bod/profiles': (_req, body) => {
      const p = profileOut(42, (body as { name: string }).name);
      profiles.push(p);
      return jsonResponse(p, 201);
    },
    'PUT /api/v1/bod/profiles/5': () => jsonResponse(profiles[0]),
    'POST /api/v1/bod/profiles/42/apply-to-config': () => jsonResponse(written(7)),
    'POST /api/v1/bod/profiles/5/apply-to-config': () => jsonResponse(written(8)),
    ...appliesAndRunning,
  });
}

/** The API model's published starting inputs, read from the API's OpenAPI schema itself (not the generated client):
 * a page that restates them, or a stale generated client, differs from this. */
function apiStartingInputs(): Record<string, unknown> {
  const doc = JSON.parse(readFileSync(resolve(__dirname, '../../../api/openapi.json'), 'utf8'));
  const examples = doc.components.schemas.BodInputs.examples as Record<string, unknown>[] | undefined;
  if (!examples?.length) throw new Error('api/openapi.json: BodInputs publishes no example');
  return examples[0];
}

describe('BodPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it("starts a new profile from the API model's starting inputs, every one of them", async () => {
    const start = apiStartingInputs();
    const calls = bodApi([]);
    renderWithProviders(<BodPage />);
    await waitFor(() => expect(calls.some((c) => c.path === '/api/v1/bod/derive')).toBe(true));
    const derive = calls.find((c) => c.path === '/api/v1/bod/derive')?.body as { inputs: Record<string, unknown> };
    expect(derive.inputs).toEqual(start);
    // What the form shows is what it sends: a field, the role and the bit error rate.
    expect(screen.getByRole('textbox', { name: 'Forward rate (bit/s)' })).toHaveValue(Number(start.forward_rate_bps).toLocaleString('en-US'));
    expect(screen.getByRole('radio', { name: new RegExp(`^${String(start.role)} `) })).toBeChecked();
    expect(screen.getByRole('textbox', { name: /Bit error rate/ })).toHaveValue(String(start.ber));
  });

  it('confirms the written config version for a NEW profile, after it becomes the selected one', async () => {
    const calls = bodApi([]);
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    const name = await screen.findByLabelText(/^Profile name/);
    await user.clear(name);
    await user.type(name, 'geo');
    await user.click(screen.getByRole('button', { name: 'Save, write to config and apply' }));

    expect(await screen.findByText('Version 7 applied')).toBeInTheDocument();
    // The editor now shows the saved profile (the selection moved to it), and the message is still there.
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'Profile' })).toHaveValue('geo'));
    expect(screen.getByText('Version 7 applied')).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST' && c.path === '/api/v1/bod/profiles/42/apply-to-config')).toHaveLength(1);
  });

  it('writes an existing profile into what the gateway runs, names the pending version it leaves out, and applies it', async () => {
    const calls = bodApi([profileOut(5, 'leo')]);
    const urls: string[] = [];
    const fetch = globalThis.fetch;
    vi.stubGlobal('fetch', (req: Request) => {
      urls.push(req.url);
      return fetch(req);
    });
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    expect(await screen.findByRole('heading', { name: 'Change to what the gateway runs' })).toBeInTheDocument();
    expect(await screen.findByRole('note')).toHaveTextContent('The gateway runs version 3; version 4 is saved but not applied. Writing this profile starts from version 3');
    await user.click(await screen.findByRole('button', { name: 'Save, write to config and apply' }));
    expect(await screen.findByText('Version 8 applied')).toBeInTheDocument();
    expect(calls.some((c) => c.method === 'POST' && c.path === '/api/v1/versions/8/apply')).toBe(true);
    const search = (path: string) => urls.filter((u) => new URL(u).pathname === path).map((u) => new URL(u).search);
    expect(search('/api/v1/bod/profiles/5/apply-to-config')).toEqual(['?base=running']);
    expect(new Set(search('/api/v1/bod/derive'))).toEqual(new Set(['?against=running']));
  });

  it('shows hybla.cwnd_max among the config changes and lets it be overridden', async () => {
    bodApi([profileOut(5, 'leo')]);
    renderWithProviders(<BodPage />);
    const table = await screen.findByRole('table', { name: 'Config changes from this profile' });
    const row = within(table).getByText('hybla.cwnd_max').closest('tr') as HTMLElement;
    expect(within(row).getByText('1000')).toBeInTheDocument();
    expect(within(row).getByText(/2000/)).toBeInTheDocument();
    expect(screen.getByLabelText('hybla_cwnd_max')).toBeInTheDocument();
    // Only what the API says may be overridden gets an override field.
    expect(screen.queryByLabelText('shaping_overhead_bytes')).toBeNull();
  });

  it('shows the derived shaping with its derivation, why it sits at the top of the grant, and the config change', async () => {
    bodApi([profileOut(5, 'vsat', 'terminal')]);
    renderWithProviders(<BodPage />);
    const derivedTable = await screen.findByRole('table', { name: 'Derived values' });
    const rateRow = within(derivedTable).getByText('shaping_rate_bps').closest('tr') as HTMLElement;
    expect(within(rateRow).getByText(/5\.0 Mbit\/s/)).toBeInTheDocument();
    expect(within(rateRow).getByText(TERMINAL_SHAPING)).toBeInTheDocument();
    const why = document.getElementById('bod-shaping-why') as HTMLElement;
    expect(why).toHaveTextContent('Shaping (5.0 Mbit/s):');
    expect(why).toHaveTextContent(/between CRA and CRA \+ RBDC max/);
    expect(why).toHaveTextContent(/Shaping at CRA would never let the modem see more than CRA/);
    const changes = screen.getByRole('table', { name: 'Config changes from this profile' });
    const row = (label: string) => within(changes).getByText(label).closest('tr') as HTMLElement;
    expect(within(row('shaping.enabled')).getByText('false')).toBeInTheDocument();
    expect(within(row('shaping.enabled')).getByText('true (changes)')).toBeInTheDocument();
    expect(within(row('shaping.rate_bps')).getByText('5000000 (changes)')).toBeInTheDocument();
    expect(within(row('shaping.overhead_bytes')).getByText('12 (changes)')).toBeInTheDocument();
    expect(screen.getByLabelText('shaping_rate_bps')).toBeInTheDocument();
    expect(screen.getByRole('textbox', { name: 'Modem framing per packet (0 = unknown) (bytes)' })).toHaveValue('12');
  });

  it('explains a hub shaper by the forward carrier', async () => {
    bodApi([profileOut(5, 'hub')]);
    renderWithProviders(<BodPage />);
    await screen.findByRole('table', { name: 'Derived values' });
    const why = document.getElementById('bod-shaping-why') as HTMLElement;
    expect(why).toHaveTextContent(/A hub sends forward, and the forward carrier is not on demand/);
    expect(why).not.toHaveTextContent(/RBDC/);
  });

  it('says which congestion control the bit error rate calls for and writes it into the config', async () => {
    const calls = bodApi([profileOut(5, 'hts')]);
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    const why = () => document.getElementById('bod-cc-why') as HTMLElement;
    await waitFor(() => expect(why()).toHaveTextContent('Satellite congestion control: hybla.'));
    const changes = () => screen.getByRole('table', { name: 'Config changes from this profile' });
    const row = () => within(changes()).getByText('satellite.congestion_control').closest('tr') as HTMLElement;
    expect(within(changes()).queryByText('satellite.congestion_control')).toBeNull(); // unchanged: not a change

    const ber = screen.getByRole('textbox', { name: /Bit error rate/ });
    await user.clear(ber);
    await user.type(ber, '1e-6');
    await waitFor(() => expect(why()).toHaveTextContent('Satellite congestion control: hybla_ld.'));
    expect(why()).toHaveTextContent(LOSSY_WHY);
    expect(within(row()).getByText('hybla_ld (changes)')).toBeInTheDocument();
    // Typing "1e-6" passes through "1" (which calls for hybla_ld too): wait for the debounced 1e-6 itself.
    const sent = () => calls.filter((c) => c.path === '/api/v1/bod/derive').map((c) => (c.body as { inputs: { ber: number } }).inputs.ber);
    await waitFor(() => expect(sent()).toContain(1e-6));

    await user.clear(ber);
    await user.type(ber, 'lots');
    expect(await screen.findByText('a number, e.g. 1e-6')).toBeInTheDocument();
  });
});

describe('BodPage refusals and risks', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('says at once why the config was not written, and keeps saying it after the new profile is selected', async () => {
    const api = {
      'GET /api/v1/bod/profiles': () => jsonResponse(list),
      'POST /api/v1/bod/derive': () => jsonResponse(deriveOut(DERIVE)),
      'POST /api/v1/bod/profiles': () => {
        list.push(profileOut(42, 'geo'));
        return jsonResponse(list[0], 201);
      },
      'POST /api/v1/bod/profiles/42/apply-to-config': () =>
        jsonResponse({ error: { code: 'validation_error', message: 'Hybla › base RTT (ms): must be at most 10,000', field: 'hybla.base_rtt_ms' } }, 422),
    };
    const list: ReturnType<typeof profileOut>[] = [];
    mockApi(api);
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    await user.click(await screen.findByRole('button', { name: 'Save, write to config and apply' }));
    expect(await screen.findByText('Hybla › base RTT (ms): must be at most 10,000')).toBeInTheDocument();
    expect(screen.getByText('The profile is saved, but the config was not changed')).toBeInTheDocument();
  });

  it('will not write what the config refuses, and asks before writing values outside the link', async () => {
    let problems: string[] = ['Satellite › sndbuf (bytes): must be at most 1,073,741,824'];
    const risks = ['a forward rate of 100 Gbit/s is beyond any satellite carrier (the widest carry about 5 Gbit/s)'];
    const calls = mockApi({
      'GET /api/v1/bod/profiles': () => jsonResponse([profileOut(5, 'leo')]),
      'POST /api/v1/bod/derive': () => jsonResponse({ ...deriveOut(DERIVE), config_problems: problems, link_risks: risks }),
      'PUT /api/v1/bod/profiles/5': () => jsonResponse(profileOut(5, 'leo')),
      'POST /api/v1/bod/profiles/5/apply-to-config': () => jsonResponse(written(9)),
      ...appliesAndRunning,
    });
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    expect(await screen.findByText(problems[0])).toBeInTheDocument();
    await waitFor(() => expect(screen.getByRole('button', { name: 'Save, write to config and apply' })).toBeDisabled());
    problems = [];
    await user.type(screen.getByRole('textbox', { name: /^Profile name/ }), '2'); // a new derive
    await waitFor(() => expect(screen.getByRole('button', { name: 'Save, write to config and apply' })).toBeEnabled());
    await user.click(screen.getByRole('button', { name: 'Save, write to config and apply' }));
    const dialog = await screen.findByRole('dialog', { name: 'Write these values to the config and apply them?' });
    expect(within(dialog).getByText(risks[0])).toBeInTheDocument();
    expect(calls.some((c) => c.path.endsWith('/apply-to-config'))).toBe(false);
    await user.click(within(dialog).getByRole('button', { name: 'Write them anyway' }));
    expect(await screen.findByText('Version 9 applied')).toBeInTheDocument();
    expect(calls.find((c) => c.path.endsWith('/apply-to-config'))?.body).toMatchObject({ confirm: true });
  });
});
