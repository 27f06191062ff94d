import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { Route, Routes } from 'react-router-dom';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi, type Handler } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import TerminalDetailPage from './TerminalDetailPage';

const terminal = {
  name: 'alpha',
  fingerprints: [`sha256:${'a'.repeat(64)}`],
  prefixes: ['10.71.1.0/24'],
  applied: true,
  connected: true,
  idle_connections: 5,
  live_flows: 1,
  refused_prefix: 0,
  refused_other: 0,
  last_seen: 1_800_000_000,
  gateways: [],
};

const version = (over: Record<string, unknown>) => ({
  id: 3,
  terminal: 'alpha',
  created_at: 1_800_000_000,
  created_by: 'otto',
  comment: '',
  sections: ['quic'],
  state: 'applied',
  error: null,
  reported_at: 1_800_000_010,
  enrollment: 1,
  delivered_at: 1_800_000_005,
  ended_at: null,
  ...over,
});

const detail = (over: Record<string, unknown> = {}) => ({
  terminal,
  managed: true,
  last_report_at: 1_800_000_020,
  revision: 'v12',
  local_version_id: 12,
  software: '0.9.0',
  health_ok: false,
  problems: ['squid is not running'],
  rx_bytes: 3 * 1024 * 1024,
  tx_bytes: 1024,
  live_flows: 7,
  sites: [
    { name: 'ship-a', rx_bytes: 5 * 1024 * 1024, tx_bytes: 2048, live_flows: 3 },
    { name: 'other', rx_bytes: 700, tx_bytes: 30, live_flows: 0 },
  ],
  enrollment: 1,
  desired_version: null,
  applied_version_id: 3,
  ...over,
});

const site = (name: string, prefixes: string[]) => ({ site: name, prefixes, down_bps: 2_000_000, up_bps: 100_000, flows: 4, rtt_ms: 612, retrans_ps: 0.5, cache_saved_bps: 0 });

function api(role: 'admin' | 'operator' | 'viewer', extra: Record<string, Handler> = {}, d = detail()) {
  return mockApi({
    'GET /api/v1/auth/me': () => jsonResponse({ id: 2, username: 'otto', role, must_change_password: false }),
    'GET /api/v1/peer/terminals/alpha': () => jsonResponse(d),
    'GET /api/v1/peer/terminals/alpha/versions': () =>
      jsonResponse({ versions: [version({ id: 4, sections: ['shaping', 'dns'], state: 'rolled_back', error: 'tc refused the qdisc' }), version({})] }),
    'GET /api/v1/sites': () => jsonResponse({ sites: [site('site-a', ['10.71.1.0/25']), site('elsewhere', ['10.72.0.0/16'])], updated_at: 1_800_000_020 }),
    ...extra,
  });
}

function renderPage(name = 'alpha') {
  return renderWithProviders(
    <Routes>
      <Route path="/terminals/:name" element={<TerminalDetailPage />} />
    </Routes>,
    { route: `/terminals/${name}` },
  );
}

describe('TerminalDetailPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('shows its report, its sites at the hub and its versions with their states; a viewer posts nothing', async () => {
    api('viewer');
    renderPage();
    const report = await screen.findByRole('region', { name: 'Its report' });
    expect(within(report).getByText('managed from here')).toBeInTheDocument();
    expect(within(report).getByText('problems')).toBeInTheDocument();
    expect(within(report).getByText('squid is not running')).toBeInTheDocument();
    expect(report.querySelector('[data-figure="Running revision"]')).toHaveTextContent('v12');
    expect(report.querySelector('[data-figure="Live flows"]')).toHaveTextContent('7');
    expect(report.querySelector('[data-figure="Received"]')).toHaveTextContent('3.0 MiB');
    expect(report.querySelector('[data-figure="Peer path"]')).toHaveTextContent('connected');
    const sites = await screen.findByRole('table', { name: 'Its sites at the hub' });
    expect(sites).toHaveTextContent('site-a');
    expect(sites).toHaveTextContent('2.0 Mbit/s');
    expect(sites).not.toHaveTextContent('elsewhere');
    const table = await screen.findByRole('table', { name: 'Its config versions' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows[0]).toHaveTextContent('rolled back');
    expect(rows[0]).toHaveTextContent('tc refused the qdisc');
    expect(rows[0]).toHaveTextContent('shaping');
    expect(rows[1]).toHaveTextContent('applied');
    expect(screen.queryByRole('form', { name: 'New config version' })).not.toBeInTheDocument();
  });

  it("shows the terminal's own per-site figures next to the hub's, each labelled with who counted them", async () => {
    api('viewer');
    renderPage();
    const reported = await screen.findByRole('table', { name: 'Its sites as it reports them' });
    const rows = within(reported).getAllByRole('row').slice(1);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent('ship-a');
    expect(rows[0]).toHaveTextContent('5.0 MiB');
    expect(rows[0]).toHaveTextContent('2.0 KiB');
    expect(rows[0]).toHaveTextContent('3');
    expect(rows[1]).toHaveTextContent('other');
    expect(screen.getByRole('region', { name: 'Its sites as it reports them' })).toHaveTextContent('Counted by the terminal itself');
    const hub = await screen.findByRole('region', { name: 'Its sites at the hub' });
    expect(hub).toHaveTextContent('Counted by this hub');
    expect(within(hub).getByRole('table', { name: 'Its sites at the hub' })).toHaveTextContent('site-a');
  });

  it('an admin cancels a version not sent yet after a confirm naming what happens; a refusal is shown; others see no Cancel', async () => {
    let versions: Record<string, unknown>[] = [
      version({ id: 6, state: 'pending', delivered_at: null, reported_at: null, sections: ['quic'] }),
      version({ id: 5, state: 'pending', delivered_at: 1_800_000_030, reported_at: null }),
      version({}),
    ];
    let refuse = false;
    const calls = api('admin', {
      'GET /api/v1/peer/terminals/alpha/versions': () => jsonResponse({ versions }),
      'POST /api/v1/peer/terminals/alpha/versions/6/cancel': () => {
        if (refuse)
          return jsonResponse({ error: { code: 'version_not_cancellable', message: 'version 6 was sent to the terminal already: it applies it and reports the outcome' } }, 409);
        versions = [{ ...versions[0], state: 'cancelled', error: 'cancelled by otto', ended_at: 1_800_000_040 }, ...versions.slice(1)];
        return jsonResponse(versions[0]);
      },
    });
    const user = userEvent.setup();
    renderPage();
    const table = await screen.findByRole('table', { name: 'Its config versions' });
    await waitFor(() => expect(within(table).getAllByRole('row')).toHaveLength(4));
    // Only the version not sent yet offers Cancel; the one sent already says so.
    expect(within(table).getAllByRole('button', { name: /^Cancel version/ })).toHaveLength(1);
    const [, six, five] = within(table).getAllByRole('row');
    expect(five).toHaveTextContent('sent');
    expect(within(five).queryByRole('button')).not.toBeInTheDocument();
    expect(six).toHaveTextContent('not sent yet');

    // The confirm step names what happens; closing it sends nothing.
    await user.click(within(six).getByRole('button', { name: 'Cancel version 6' }));
    let dialog = await screen.findByRole('dialog', { name: 'Cancel version 6 for alpha?' });
    expect(within(dialog).getByTestId('cancel-consequence')).toHaveTextContent('alpha never gets version 6 (quic)');
    expect(within(dialog).getByTestId('cancel-consequence')).toHaveTextContent('stays in this list as cancelled');
    await user.click(within(dialog).getByRole('button', { name: 'Keep it' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument());
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);

    // The hub refuses (sent meanwhile): its reason is shown, the version is untouched.
    refuse = true;
    await user.click(within(six).getByRole('button', { name: 'Cancel version 6' }));
    dialog = await screen.findByRole('dialog', { name: 'Cancel version 6 for alpha?' });
    await user.click(within(dialog).getByRole('button', { name: 'Cancel version 6' }));
    expect(await within(dialog).findByText(/was sent to the terminal already/)).toBeInTheDocument();
    expect(versions[0].state).toBe('pending');
    await user.click(within(dialog).getByRole('button', { name: 'Keep it' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument());

    refuse = false;
    await user.click(within(table).getByRole('button', { name: 'Cancel version 6' }));
    dialog = await screen.findByRole('dialog', { name: 'Cancel version 6 for alpha?' });
    await user.click(within(dialog).getByRole('button', { name: 'Cancel version 6' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument());
    await waitFor(() => expect(within(table).getAllByRole('row')[1]).toHaveTextContent('cancelled by otto'));
    expect(within(table).queryByRole('button', { name: /^Cancel version/ })).not.toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual([
      '/api/v1/peer/terminals/alpha/versions/6/cancel',
      '/api/v1/peer/terminals/alpha/versions/6/cancel',
    ]);
  });

  it('an operator makes versions but cancels none', async () => {
    api('operator', {
      'GET /api/v1/peer/terminals/alpha/versions': () => jsonResponse({ versions: [version({ id: 6, state: 'pending', delivered_at: null, reported_at: null })] }),
    });
    renderPage();
    const table = await screen.findByRole('table', { name: 'Its config versions' });
    await waitFor(() => expect(within(table).getAllByRole('row')).toHaveLength(2));
    expect(within(table).getByText('not sent yet')).toBeInTheDocument();
    expect(within(table).queryByRole('button')).not.toBeInTheDocument();
    expect(await screen.findByRole('form', { name: 'New config version' })).toBeInTheDocument();
  });

  it('posts a version: bad input is caught or refused and nothing changes; the sections are named before it is sent', async () => {
    let posted = 0;
    const calls = api('operator', {
      'POST /api/v1/peer/terminals/alpha/versions': (_req, body) => {
        const b = body as { sections: { shaping?: { enabled: boolean; rate_bps: number } } };
        if (b.sections.shaping?.rate_bps === 0)
          return jsonResponse({ error: { code: 'invalid_config', message: 'shaping.rate_bps: required when shaping is enabled', field: 'sections.shaping.rate_bps' } }, 422);
        posted += 1;
        return jsonResponse(version({ id: 5, sections: Object.keys(b.sections), state: 'pending', reported_at: null }), 201);
      },
    });
    const user = userEvent.setup();
    renderPage();
    const form = await screen.findByRole('form', { name: 'New config version' });
    const editor = within(form).getByLabelText(/^Sections/);
    const review = within(form).getByRole('button', { name: 'Review…' });

    await user.click(editor);
    await user.paste('{"quic": "block"}');
    await user.click(review);
    expect(await within(form).findByText(/quic: must be one of pass, fallback/)).toBeInTheDocument();
    await user.clear(editor);
    await user.paste('{"peer": {}}');
    await user.click(review);
    expect(await within(form).findByText(/peer: not a section the hub sets/)).toBeInTheDocument();
    expect(screen.queryByRole('dialog')).not.toBeInTheDocument();

    // Schema-valid, refused by the API: its message is shown, nothing is stored, the draft stays.
    await user.clear(editor);
    await user.paste('{"shaping": {"enabled": true, "rate_bps": 0}}');
    await user.click(review);
    let dialog = await screen.findByRole('dialog', { name: 'Send a version to alpha?' });
    expect(within(dialog).getByRole('list', { name: 'Sections this version sets' })).toHaveTextContent('shaping');
    expect(within(dialog).getByTestId('version-consequence')).toHaveTextContent('its section shaping');
    await user.click(within(dialog).getByRole('button', { name: 'Send to alpha' }));
    expect(await within(dialog).findByText(/required when shaping is enabled/)).toBeInTheDocument();
    expect(within(dialog).getByText('The hub refused this version: nothing was stored')).toBeInTheDocument();
    expect(posted).toBe(0);
    await user.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(editor).toHaveValue('{"shaping": {"enabled": true, "rate_bps": 0}}');

    // The typed fields write their section into the editor.
    await user.clear(editor);
    await user.click(within(form).getByRole('button', { name: 'Set quic' }));
    expect(JSON.parse((editor as HTMLTextAreaElement).value)).toEqual({ quic: 'fallback' });
    await user.click(within(form).getByRole('button', { name: 'Set shaping' }));
    expect(JSON.parse((editor as HTMLTextAreaElement).value)).toEqual({ quic: 'fallback', shaping: { enabled: true, rate_bps: 10_000_000, queue_packets: 1000, overhead_bytes: 0 } });
    await user.type(within(form).getByLabelText(/^Comment/), 'slow the site down');
    await user.click(review);
    dialog = await screen.findByRole('dialog', { name: 'Send a version to alpha?' });
    expect(within(dialog).getByTestId('version-consequence')).toHaveTextContent('these 2 sections quic, shaping');
    await user.click(within(dialog).getByRole('button', { name: 'Send to alpha' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).not.toBeInTheDocument());
    const sent = calls.filter((c) => c.method === 'POST');
    expect(sent).toHaveLength(2);
    expect(sent[1].body).toEqual({ sections: { quic: 'fallback', shaping: { enabled: true, rate_bps: 10_000_000, queue_packets: 1000, overhead_bytes: 0 } }, comment: 'slow the site down' });
    expect(posted).toBe(1);
    expect(editor).toHaveValue('');
  });

  it('a terminal enrolled by its fingerprint takes no versions', async () => {
    const calls = api('operator', {}, detail({ managed: false, last_report_at: null, health_ok: null, problems: [], rx_bytes: null, tx_bytes: null, live_flows: null, revision: null }));
    renderPage();
    expect(await screen.findByText('not managed')).toBeInTheDocument();
    expect(screen.getByText(/Only a terminal enrolled with a token/)).toBeInTheDocument();
    expect(screen.queryByRole('form', { name: 'New config version' })).not.toBeInTheDocument();
    expect(calls.some((c) => c.path.endsWith('/versions'))).toBe(false);
  });

  it('says so when no such terminal is enrolled', async () => {
    mockApi({
      'GET /api/v1/peer/terminals/ghost': () => jsonResponse({ error: { code: 'not_found', message: "no terminal 'ghost'" } }, 404),
      'GET /api/v1/peer/terminals/ghost/versions': () => jsonResponse({ error: { code: 'not_found', message: "no terminal 'ghost'" } }, 404),
    });
    renderPage('ghost');
    expect(await screen.findByText('No terminal ghost is enrolled here')).toBeInTheDocument();
  });
});
