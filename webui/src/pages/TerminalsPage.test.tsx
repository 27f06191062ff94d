import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import TerminalsPage from './TerminalsPage';

const FP_A = `sha256:${'a'.repeat(64)}`;
const FP_B = `sha256:${'b'.repeat(64)}`;
const HUB_FP = `sha256:${'c'.repeat(64)}`;

const terminal = (over: Record<string, unknown>) => ({
  name: 'alpha',
  fingerprints: [FP_A],
  prefixes: ['10.71.1.0/24'],
  applied: true,
  connected: true,
  idle_connections: 6,
  live_flows: 2,
  refused_prefix: 1,
  refused_other: 0,
  last_seen: 1_800_000_000,
  gateways: [],
  ...over,
});

const list = (terminals: unknown[], role = 'hub') => ({
  role,
  terminals,
  refused_unknown: 3,
  desired_version_id: 7,
  active_version_id: 7,
  errors: [],
});

const change = (ok = true) => ({
  version_id: 8,
  apply: ok
    ? { ok: true, version_id: 8, active_version_id: 8, revision: 'v8', error: null, gateways: [] }
    : { ok: false, version_id: 8, active_version_id: 7, error: { code: 'apply_failed', message: 'nft refused it' }, gateways: [] },
});

function api(role: 'operator' | 'viewer', terminals: unknown[], extra: Parameters<typeof mockApi>[0] = {}) {
  return mockApi({
    'GET /api/v1/auth/me': () => jsonResponse({ id: 2, username: 'otto', role, must_change_password: false }),
    'GET /api/v1/peer/terminals': () => jsonResponse(list(terminals)),
    'GET /api/v1/peer/identity': () =>
      jsonResponse({ role: 'hub', identities: [{ gateway: 'local', fingerprint: HUB_FP, certificate_pem: 'PEM', next_fingerprint: null, error: null }], peer: null, peer_error: null }),
    'GET /api/v1/peer/enrollment-tokens': () => jsonResponse({ tokens: [] }),
    ...extra,
  });
}

describe('TerminalsPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it("lists each terminal's identity, prefixes, connections and refusals, and the hub's own fingerprint", async () => {
    api('viewer', [terminal({}), terminal({ name: 'bravo', fingerprints: [FP_B], prefixes: ['10.72.1.0/24'], connected: false, idle_connections: 0, live_flows: 0, last_seen: null }), terminal({ name: 'charlie', applied: false, connected: false })]);
    renderWithProviders(<TerminalsPage />);
    const table = await screen.findByRole('table', { name: 'Enrolled terminals' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows[0]).toHaveTextContent('alpha');
    expect(rows[0]).toHaveTextContent('connected');
    expect(rows[0]).toHaveTextContent('6 / 2');
    expect(rows[0]).toHaveTextContent('10.71.1.0/24');
    expect(rows[1]).toHaveTextContent('not connected');
    expect(rows[1]).toHaveTextContent('never');
    expect(rows[2]).toHaveTextContent('not applied yet');
    expect(screen.getByTestId('refused-unknown')).toHaveTextContent('3');
    expect(await screen.findByText(HUB_FP)).toBeInTheDocument();
    // A viewer changes nothing.
    expect(screen.queryByRole('form', { name: 'Enroll a terminal' })).not.toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Revoke…' })).not.toBeInTheDocument();
  });

  it('enrolls a terminal; a malformed fingerprint is caught before sending, the server names an overlapping prefix', async () => {
    const calls = api('operator', [terminal({})], {
      'POST /api/v1/peer/terminals': (_req, body) =>
        (body as { prefixes: string[] }).prefixes[0] === '10.71.1.128/25'
          ? jsonResponse({ error: { code: 'prefix_overlap', message: "10.71.1.128/25 overlaps 10.71.1.0/24 of terminal 'alpha'", field: 'prefixes' } }, 422)
          : jsonResponse(change(), 201),
    });
    const user = userEvent.setup();
    renderWithProviders(<TerminalsPage />);
    const form = await screen.findByRole('form', { name: 'Enroll a terminal' });
    await user.type(within(form).getByLabelText(/^Name/), 'bravo');
    await user.type(within(form).getByLabelText(/^Site prefixes/), '10.71.1.128/25');
    await user.type(within(form).getByLabelText(/^Terminal fingerprint/), 'sha256:XYZ');
    await user.click(within(form).getByRole('button', { name: 'Enroll and apply' }));
    expect(await within(form).findByText(/64 lowercase hex digits/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);

    await user.clear(within(form).getByLabelText(/^Terminal fingerprint/));
    await user.type(within(form).getByLabelText(/^Terminal fingerprint/), FP_B);
    await user.click(within(form).getByRole('button', { name: 'Enroll and apply' }));
    expect(await within(form).findByText(/overlaps 10.71.1.0\/24 of terminal 'alpha'/)).toBeInTheDocument();

    await user.clear(within(form).getByLabelText(/^Site prefixes/));
    await user.type(within(form).getByLabelText(/^Site prefixes/), '10.72.1.0/24{enter}fd72:1::/64');
    await user.click(within(form).getByRole('button', { name: 'Enroll and apply' }));
    await waitFor(() => expect(calls.filter((c) => c.method === 'POST')).toHaveLength(2));
    expect(calls.filter((c) => c.method === 'POST')[1].body).toEqual({ name: 'bravo', prefixes: ['10.72.1.0/24', 'fd72:1::/64'], fingerprint: FP_B, comment: '' });
  });

  it('names the consequence of a revocation before it applies, and says when the gateways refused it', async () => {
    const calls = api('operator', [terminal({})], { 'DELETE /api/v1/peer/terminals/alpha': () => jsonResponse(change(false)) });
    const user = userEvent.setup();
    renderWithProviders(<TerminalsPage />);
    await user.click(await screen.findByRole('button', { name: 'Revoke…' }));
    const consequence = await screen.findByTestId('revoke-consequence');
    expect(consequence).toHaveTextContent('6 idle connections and 2 live flows at the hub are closed within 5 s');
    expect(consequence).toHaveTextContent('refused from then on');
    expect(calls.filter((c) => c.method === 'DELETE')).toHaveLength(0);
    await user.click(screen.getByRole('button', { name: 'Revoke alpha' }));
    expect(await screen.findByText('Version 8 stored but not applied')).toBeInTheDocument();
    expect(screen.getByText(/nft refused it/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'DELETE')).toHaveLength(1);
  });

  it('rotates: adds the next identity, then drops the old one', async () => {
    const calls = api('operator', [terminal({ fingerprints: [FP_A, FP_B] })], {
      [`DELETE /api/v1/peer/terminals/alpha/fingerprints/${FP_A}`]: () => jsonResponse(change()),
    });
    vi.spyOn(window, 'confirm').mockReturnValue(true);
    const user = userEvent.setup();
    renderWithProviders(<TerminalsPage />);
    expect(await screen.findByRole('button', { name: 'Rotate…' })).toBeDisabled(); // two identities already
    await user.click(screen.getByRole('button', { name: /^Drop identity sha256:aaaaaaa/ }));
    await waitFor(() => expect(calls.filter((c) => c.method === 'DELETE')).toHaveLength(1));
  });

  it('at a terminal, points to its own identity instead', async () => {
    mockApi({
      'GET /api/v1/auth/me': () => jsonResponse({ id: 2, username: 'otto', role: 'operator', must_change_password: false }),
      'GET /api/v1/peer/terminals': () => jsonResponse(list([], 'terminal')),
      'GET /api/v1/peer/identity': () => jsonResponse({ role: 'terminal', identities: [], peer: null, peer_error: null }),
    });
    renderWithProviders(<TerminalsPage />);
    expect(await screen.findByText('This gateway is a terminal')).toBeInTheDocument();
  });
});
