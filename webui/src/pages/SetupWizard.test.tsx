import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { schemaDefaultConfig } from '../test/config';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import SetupWizard from './SetupWizard';

const NICS = [
  { name: 'lo', addresses: ['127.0.0.1/8'], oper_state: 'unknown', up: true, running: true, loopback: true, mtu: 65536, mac: null, configured_as: null },
  { name: 'lan0', addresses: ['10.71.1.1/24'], oper_state: 'up', up: true, running: true, loopback: false, mtu: 1500, mac: null, configured_as: null },
  { name: 'sat0', addresses: ['10.71.2.1/30'], oper_state: 'up', up: true, running: true, loopback: false, mtu: 1500, mac: null, configured_as: null },
];

function wizardApi() {
  return mockApi({
    'GET /api/v1/system/interfaces': () => jsonResponse({ interfaces: NICS }),
    'GET /api/v1/config': () => jsonResponse({ id: 1, config: schemaDefaultConfig() }),
    'GET /api/v1/config/running': () => jsonResponse({ reachable: true, revision: null, config: null, version_id: null, desired_version_id: 1, in_sync: false, changes: [], checked_at: 1, error: null, needs_setup: true }),
    'POST /api/v1/config/preview': () =>
      jsonResponse({ base_version_id: 1, changes: [{ path: '$.role', op: 'changed', old: 'hub', new: 'terminal' }], issues: [] }),
    'PUT /api/v1/config': () => jsonResponse({ version_id: 2, issues: [] }),
    'POST /api/v1/versions/2/apply': () => jsonResponse({ ok: true, version_id: 2, active_version_id: 2, revision: 'v2', error: null }),
  });
}

describe('SetupWizard', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('goes from nothing configured to an applied terminal config, refusing to move on with invalid networks', async () => {
    const calls = wizardApi();
    const user = userEvent.setup();
    renderWithProviders(<SetupWizard />, { route: '/setup' });
    await user.click(await screen.findByText('terminal (at the remote site)'));
    await user.click(screen.getByRole('button', { name: 'Next' }));
    // The box's interfaces, as the gateway listed them (the proposal's lan0 and sat0 exist here).
    expect(await screen.findByRole('textbox', { name: /Satellite interface/ })).toHaveValue('sat0 — 10.71.2.1/30 · up');
    await user.click(screen.getByRole('button', { name: 'Next' }));

    const next = screen.getByRole('button', { name: 'Next' });
    expect(next).toBeDisabled(); // no served subnet yet
    await user.type(screen.getByRole('textbox', { name: /Served subnets/ }), '10.71.1.0/33');
    expect(await screen.findByText(/'10.71.1.0\/33' is not valid/)).toBeInTheDocument();
    expect(next).toBeDisabled();
    await user.clear(screen.getByRole('textbox', { name: /Served subnets/ }));
    await user.type(screen.getByRole('textbox', { name: /Served subnets/ }), '10.71.1.0/24');
    await user.type(screen.getByRole('textbox', { name: /Routes across the satellite/ }), '10.71.3.0/24 10.71.2.2');
    expect(await screen.findByText(/write a route as/)).toBeInTheDocument();
    expect(next).toBeDisabled();
    await user.clear(screen.getByRole('textbox', { name: /Routes across the satellite/ }));
    await user.type(screen.getByRole('textbox', { name: /Routes across the satellite/ }), '10.71.3.0/24 via 10.71.2.2');
    await waitFor(() => expect(next).toBeEnabled());
    await user.click(next);
    expect(await screen.findByRole('textbox', { name: /Satellite leg/ })).toHaveValue('hybla_ld');
    // The link's rates: unknown until entered (then the peer path sends nothing twice).
    expect(screen.getAllByText(/unknown: the peer path sends nothing twice/)).toHaveLength(2);
    await user.clear(screen.getByRole('textbox', { name: 'Forward rate (bit/s)' }));
    await user.type(screen.getByRole('textbox', { name: 'Forward rate (bit/s)' }), '50000000');
    await user.clear(screen.getByRole('textbox', { name: 'Return rate (bit/s)' }));
    await user.type(screen.getByRole('textbox', { name: 'Return rate (bit/s)' }), '5000000');
    expect(await screen.findByText(/the carrier's rate: 50(\.0)? Mbit\/s/)).toBeInTheDocument();
    await user.click(screen.getByRole('button', { name: 'Next' }));

    await user.click(screen.getByRole('button', { name: 'Review changes' }));
    expect(await screen.findByText('Changes to version 1:')).toBeInTheDocument();
    await user.click(screen.getByRole('button', { name: 'Apply this config' }));
    expect(await screen.findByText('The gateway is set up')).toBeInTheDocument();

    const put = calls.find((c) => c.method === 'PUT');
    expect(put?.body).toMatchObject({
      comment: 'first setup (wizard)',
      config: {
        role: 'terminal',
        interfaces: { lan: ['lan0'], satellite: 'sat0' },
        served_subnets: ['10.71.1.0/24'],
        satellite: { congestion_control: 'hybla_ld', routes: [{ dst: '10.71.3.0/24', via: '10.71.2.2' }], forward_rate_bps: 50_000_000, return_rate_bps: 5_000_000 },
      },
    });
    expect(calls.some((c) => c.method === 'POST' && c.path === '/api/v1/versions/2/apply')).toBe(true);
  });

  it('a cache with the resolver off asks for the resolvers Squid uses (the proposal names none)', async () => {
    const calls = wizardApi();
    const user = userEvent.setup();
    renderWithProviders(<SetupWizard />, { route: '/setup' });
    await user.click(await screen.findByText('hub (at the teleport)'));
    await user.click(screen.getByRole('button', { name: 'Next' }));
    expect(await screen.findByRole('textbox', { name: /Satellite interface/ })).toHaveValue('sat0 — 10.71.2.1/30 · up');
    await user.click(screen.getByRole('button', { name: 'Next' }));
    await user.type(screen.getByRole('textbox', { name: /Served subnets/ }), '10.71.1.0/24');
    await user.click(screen.getByRole('button', { name: 'Next' }));

    const next = screen.getByRole('button', { name: 'Next' });
    expect(screen.queryByRole('textbox', { name: /Resolvers for the cache/ })).toBeNull();
    await user.click(screen.getByLabelText(/Cache web objects/));
    expect(await screen.findByText(/The cache needs a resolver/)).toBeInTheDocument();
    expect(next).toBeDisabled();
    await user.type(screen.getByRole('textbox', { name: /Resolvers for the cache/ }), '10.71.3.53');
    await waitFor(() => expect(next).toBeEnabled());
    await user.click(next);
    await user.click(screen.getByRole('button', { name: 'Review changes' }));
    await user.click(await screen.findByRole('button', { name: 'Apply this config' }));
    expect(await screen.findByText('The gateway is set up')).toBeInTheDocument();
    const put = calls.find((c) => c.method === 'PUT');
    expect(put?.body).toMatchObject({ config: { role: 'hub', cache: { enabled: true }, dns: { enabled: false, upstream: ['10.71.3.53'] } } });
  });
});
