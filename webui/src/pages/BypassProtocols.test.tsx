// The bypass form creates an entry of every protocol the gateway accepts (its schema's BypassProtocol), with ports
// offered exactly for the protocols the schema says take them.
import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { gatewayConfigSchema } from '../api/gateway-schema.gen';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import BypassPage from './BypassPage';

const schema = gatewayConfigSchema.$defs ?? {};
const PROTOCOLS = (schema.BypassProtocol.enum ?? []).map(String);
const WITH_PORTS = (schema.BypassRule.properties?.ports?.['x-protocols'] as string[] | undefined) ?? [];

const change = (preview: boolean) => ({ version_id: preview ? 3 : 6, issues: [], changed: true, base_version_id: 3, changes: [], preview });
const routes = {
  'GET /api/v1/policy/bypass': () => jsonResponse({ rules: [], version_id: 3 }),
  'GET /api/v1/stats/bypass': () => jsonResponse({ rules: [], updated_at: null }),
  'GET /api/v1/config/running': () =>
    jsonResponse({ reachable: true, revision: 'v3', config: null, version_id: 3, desired_version_id: 3, in_sync: true, changes: [], checked_at: 1, error: null, needs_setup: false }),
  'POST /api/v1/versions/6/apply': () => jsonResponse({ ok: true, version_id: 6, active_version_id: 6, revision: 'v6', error: null, gateways: [] }),
  'POST /api/v1/policy/bypass': (req: Request) => jsonResponse(change(new URL(req.url).searchParams.get('preview') === 'true')),
};

describe('the bypass form', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('knows the protocols from the schema', () => {
    expect(PROTOCOLS).toEqual(expect.arrayContaining(['tcp', 'udp', 'esp', 'ah', 'icmp', 'any']));
    expect(WITH_PORTS.length).toBeGreaterThan(0);
  });

  it.each(PROTOCOLS)('creates a %s entry, with ports only where the gateway takes them', async (protocol) => {
    const calls = mockApi(routes);
    const user = userEvent.setup();
    renderWithProviders(<BypassPage />);
    await user.type(await screen.findByRole('textbox', { name: /^Rule name/ }), `r-${protocol}`);
    await user.click(screen.getByRole('textbox', { name: 'Protocol' }));
    await user.click(await screen.findByRole('option', { name: protocol, hidden: true }));
    await user.type(screen.getByRole('textbox', { name: /^CIDRs/ }), '192.0.2.0/24{enter}');
    const ports = screen.getByRole('textbox', { name: /^Ports/ });
    if (WITH_PORTS.includes(protocol)) {
      expect(ports).toBeEnabled();
      await user.type(ports, '443{enter}');
    } else {
      expect(ports).toBeDisabled();
    }
    await user.click(screen.getByRole('button', { name: 'Add rule' }));
    await user.click(await screen.findByRole('button', { name: 'Save and apply' }));
    await screen.findByText('Version 6 applied');
    const sent = calls.filter((c) => c.method === 'POST' && c.path === '/api/v1/policy/bypass').map((c) => c.body);
    expect(sent.at(-1)).toMatchObject({
      name: `r-${protocol}`,
      protocol,
      cidrs: ['192.0.2.0/24'],
      ports: WITH_PORTS.includes(protocol) ? ['443'] : [],
    });
  });
});
