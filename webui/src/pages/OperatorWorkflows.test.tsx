// The everyday edits, as an operator and as a viewer sees them: a class edited in place, a risky bypass rule
// confirmed with its consequences named, tokens created and revoked; what a viewer may not do is not offered.
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi, OPERATOR } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import BypassPage from './BypassPage';
import PolicyPage from './PolicyPage';
import TokensPage from './TokensPage';

const VIEWER = { ...OPERATOR, username: 'vera', role: 'viewer' };
const web = { name: 'web', priority: 100, action: 'accelerate', match: { protocol: 'tcp', dports: ['80'], src: [], dst: [] }, satellite: { congestion_control: null } };
const classes = { 'GET /api/v1/policy/classes': () => jsonResponse({ classes: [web], issues: [], version_id: 3 }) };
const esp = { rule: { name: 'ipsec-esp', builtin: true, protocol: 'esp', cidrs: [], ports: [] }, enabled: true, protected: true };
// The gateway runs version 3; versions 4 and 5 are saved but not applied.
const running = {
  'GET /api/v1/config/running': () =>
    jsonResponse({ reachable: true, revision: 'v3', config: null, version_id: 3, desired_version_id: 5, in_sync: false, changes: [], checked_at: 1, error: null, needs_setup: false }),
  'POST /api/v1/versions/6/apply': () => jsonResponse({ ok: true, version_id: 6, active_version_id: 6, revision: 'v6', error: null, gateways: [] }),
};
const change = (over: object = {}) => ({
  version_id: 6,
  issues: [],
  changed: true,
  base_version_id: 3,
  changes: [{ path: '$.classes[0].satellite.congestion_control', op: 'changed', old: null, new: 'bbr' }],
  preview: false,
  ...over,
});
/** A change route that answers its preview with what it changes in version 3, and its edit with version 6. */
const changeRoute = (over: object = {}) => (req: Request) =>
  new URL(req.url).searchParams.get('preview') === 'true' ? jsonResponse(change({ version_id: 3, preview: true, ...over })) : jsonResponse(change(over));
const bypass = {
  'GET /api/v1/policy/bypass': () => jsonResponse({ rules: [esp], version_id: 3 }),
  'GET /api/v1/stats/bypass': () => jsonResponse({ rules: [], updated_at: null }),
};

describe('operator workflows', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('edits a class in place against what runs: pending versions named, the review against what runs, saved and applied', async () => {
    const calls = mockApi({ ...classes, ...running, 'PATCH /api/v1/policy/classes/web': changeRoute() });
    const user = userEvent.setup();
    renderWithProviders(<PolicyPage />);
    // The page names what is pending beside the classes that run.
    expect(await screen.findByRole('note')).toHaveTextContent('versions 4–5 are saved but not applied');
    await user.click(await screen.findByRole('button', { name: 'Edit class web' }));
    const dialog = await screen.findByRole('dialog');
    await user.click(within(dialog).getByRole('textbox', { name: 'Satellite congestion control' }));
    await user.click(await screen.findByRole('option', { name: 'bbr', hidden: true }));
    await user.click(within(dialog).getByRole('button', { name: 'Review changes' }));
    const review = await within(dialog).findByLabelText('Changes to review');
    expect(review).toHaveTextContent('Changes to version 3 (what the gateway runs):');
    expect(review).toHaveTextContent('$.classes[0].satellite.congestion_control');
    const note = within(dialog).getByRole('note');
    expect(note).toHaveTextContent('The gateway runs version 3; versions 4–5 are saved but not applied.');
    expect(note).toHaveTextContent('applying one of them later would undo this change unless it is made again');
    await user.click(within(dialog).getByRole('button', { name: 'Save and apply' }));
    expect(await screen.findByText('Version 6 applied')).toBeInTheDocument();
    const patches = calls.filter((c) => c.method === 'PATCH');
    expect(patches.map((c) => c.path)).toEqual(['/api/v1/policy/classes/web', '/api/v1/policy/classes/web']);
    expect(patches[0].body).toMatchObject({ name: 'web', satellite: { congestion_control: 'bbr' } });
    expect(calls.some((c) => c.method === 'POST' && c.path === '/api/v1/versions/6/apply')).toBe(true);
  });

  it('edits against what runs: every change route is asked with base=running, the preview first', async () => {
    const urls: string[] = [];
    mockApi({
      ...classes,
      ...running,
      'DELETE /api/v1/policy/classes/web': (req) => {
        urls.push(req.url);
        return changeRoute({ changes: [{ path: '$.classes[0]', op: 'removed', old: web, new: null }] })(req);
      },
    });
    const user = userEvent.setup();
    renderWithProviders(<PolicyPage />);
    await user.click(await screen.findByRole('button', { name: 'Delete class web' }));
    const dialog = await screen.findByRole('dialog', { name: 'Delete class web?' });
    expect(await within(dialog).findByLabelText('Changes to review')).toHaveTextContent('$.classes[0]');
    await user.click(within(dialog).getByRole('button', { name: 'Delete and apply' }));
    expect(await screen.findByText('Version 6 applied')).toBeInTheDocument();
    expect(urls.map((u) => new URL(u).search)).toEqual(['?base=running&preview=true', '?base=running']);
  });

  it('says a save that changed nothing made no version', async () => {
    mockApi({ ...classes, ...running, 'PATCH /api/v1/policy/classes/web': () => jsonResponse(change({ version_id: 3, changed: false, changes: [] })) });
    const user = userEvent.setup();
    renderWithProviders(<PolicyPage />);
    await user.click(await screen.findByRole('button', { name: 'Edit class web' }));
    await user.click(within(await screen.findByRole('dialog')).getByRole('button', { name: 'Review changes' }));
    expect(await screen.findByText(/says this already: nothing to save/)).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Save and apply' })).toBeDisabled();
  });

  it('offers every bypass protocol the gateway accepts, ICMP included', async () => {
    const calls = mockApi({ ...bypass, ...running, 'POST /api/v1/policy/bypass': changeRoute() });
    const user = userEvent.setup();
    renderWithProviders(<BypassPage />);
    await user.type(await screen.findByRole('textbox', { name: /^Rule name/ }), 'ping');
    await user.click(screen.getByRole('textbox', { name: 'Protocol' }));
    const options = (await screen.findAllByRole('option', { hidden: true })).map((o) => o.textContent);
    expect(options).toEqual(['tcp', 'udp', 'esp', 'ah', 'icmp', 'any']);
    await user.click(screen.getByRole('option', { name: 'icmp', hidden: true }));
    await user.click(screen.getByRole('button', { name: 'Add rule' }));
    await user.click(await screen.findByRole('button', { name: 'Save and apply' }));
    await screen.findByText('Version 6 applied');
    expect(calls.find((c) => c.method === 'POST')?.body).toMatchObject({ name: 'ping', protocol: 'icmp' });
  });

  it('names the risks of a wide bypass rule and adds it only when confirmed', async () => {
    let confirmed = false;
    const calls = mockApi({
      ...bypass,
      ...running,
      'POST /api/v1/policy/bypass': (r, body) => {
        if ((body as { confirm?: boolean }).confirm) {
          confirmed = true;
          return changeRoute()(r);
        }
        const risks = [{ code: 'bypasses_served', message: "'all' matches all traffic of every address: nothing the gateway serves would be accelerated or cached any more" }];
        return jsonResponse({ error: { code: 'confirm_required', message: risks[0].message, field: null, details: { risks } } }, 409);
      },
    });
    const user = userEvent.setup();
    renderWithProviders(<BypassPage />);
    await user.type(await screen.findByRole('textbox', { name: /^Rule name/ }), 'all');
    await user.type(screen.getByRole('textbox', { name: 'CIDRs' }), '0.0.0.0/0{enter}');
    await user.click(screen.getByRole('button', { name: 'Add rule' }));
    const dialog = await screen.findByRole('dialog', { name: 'Check this rule before it is added' });
    expect(within(dialog).getByText(/nothing the gateway serves would be accelerated/)).toBeInTheDocument();
    expect(confirmed).toBe(false);
    await user.click(within(dialog).getByRole('button', { name: 'Add it anyway' }));
    await user.click(await screen.findByRole('button', { name: 'Save and apply' }));
    await screen.findByText('Version 6 applied');
    const posts = calls.filter((c) => c.method === 'POST' && c.path === '/api/v1/policy/bypass');
    expect(posts.map((c) => (c.body as { confirm: boolean }).confirm)).toEqual([false, true, true]);
  });

  it('offers a viewer no edits on Policy and Bypass', async () => {
    mockApi({ 'GET /api/v1/auth/me': () => jsonResponse(VIEWER), ...classes, ...bypass });
    const { unmount } = renderWithProviders(<PolicyPage />);
    expect(await screen.findByText('web')).toBeInTheDocument();
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Edit class web' })).toBeNull());
    expect(screen.queryByRole('button', { name: 'Add class' })).toBeNull();
    unmount();
    renderWithProviders(<BypassPage />);
    expect(await screen.findByText('ipsec-esp')).toBeInTheDocument();
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Add rule' })).toBeNull());
  });

  it('creates a token, shows its secret once, and revokes it', async () => {
    let list: unknown[] = [];
    const token = { id: 7, name: 'grafana', prefix: 'pgt_abc123', user_id: 2, username: 'otto', scope: 'read', created_at: 1, expires_at: 4e9, last_used_at: null };
    const calls = mockApi({
      'GET /api/v1/tokens': () => jsonResponse(list),
      'POST /api/v1/tokens': () => {
        list = [token];
        return jsonResponse({ token, secret: 'pgt_abc123-the-secret' }, 201);
      },
      'DELETE /api/v1/tokens/7': () => {
        list = [];
        return jsonResponse({ ok: true });
      },
    });
    vi.spyOn(window, 'confirm').mockReturnValue(true);
    const user = userEvent.setup();
    renderWithProviders(<TokensPage />);
    await user.type(await screen.findByRole('textbox', { name: /^Token name/ }), 'grafana');
    await user.click(screen.getByRole('button', { name: 'Create token' }));
    expect(await screen.findByText('pgt_abc123-the-secret')).toBeInTheDocument();
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ name: 'grafana', scope: 'read', expires_in_days: 90 });
    await user.click(await screen.findByRole('button', { name: 'Revoke token grafana' }));
    await waitFor(() => expect(calls.some((c) => c.method === 'DELETE' && c.path === '/api/v1/tokens/7')).toBe(true));
    expect(await screen.findByText('No API tokens')).toBeInTheDocument();
  });
});
