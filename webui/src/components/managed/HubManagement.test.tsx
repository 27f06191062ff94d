import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi, type Handler } from '../../test/fetch-mock';
import { schemaDefaultConfig } from '../../test/config';
import { jsonResponse, renderWithProviders } from '../../test/render';
import { HubManagementCard } from './HubManagementCard';
import { ManagedBanner } from './ManagedBanner';

const PIN = `sha256:${'e'.repeat(64)}`;
const NOT_MANAGED = { managed: false, hub_url: null, name: null, joined_at: null, last_contact_at: null, last_error: null, hub_version_id: null, outcome: null };
const MANAGED = { managed: true, hub_url: 'https://hub.example.net', name: 'alpha', joined_at: 1_800_000_000, last_contact_at: 1_800_000_100, last_error: null, hub_version_id: 4, outcome: 'applied' };

function api(role: 'admin' | 'operator' | 'viewer', status: unknown, extra: Record<string, Handler> = {}, configRole = 'terminal') {
  return mockApi({
    'GET /api/v1/auth/me': () => jsonResponse({ id: 1, username: 'root', role, must_change_password: false }),
    'GET /api/v1/managed/status': () => jsonResponse(status),
    'GET /api/v1/config': () => jsonResponse({ id: 1, config: { ...schemaDefaultConfig(), role: configRole }, comment: '', created_at: 0, created_by: 'x' }),
    ...extra,
  });
}

describe('ManagedBanner', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('names the hub and the name it manages this terminal under', async () => {
    api('viewer', MANAGED);
    renderWithProviders(<ManagedBanner />);
    const banner = await screen.findByTestId('managed-banner');
    expect(banner).toHaveTextContent('Managed from the hub https://hub.example.net as alpha');
    expect(banner).toHaveTextContent('Hub version 4: applied');
  });

  it('shows nothing when not managed, or when the API has no such route', async () => {
    const calls = api('viewer', NOT_MANAGED);
    const { unmount } = renderWithProviders(<ManagedBanner />);
    await waitFor(() => expect(calls.some((c) => c.path === '/api/v1/managed/status')).toBe(true));
    expect(screen.queryByTestId('managed-banner')).not.toBeInTheDocument();
    unmount();
    vi.unstubAllGlobals();
    const none = mockApi({});
    renderWithProviders(<ManagedBanner />);
    await waitFor(() => expect(none.some((c) => c.path === '/api/v1/managed/status')).toBe(true));
    expect(screen.queryByTestId('managed-banner')).not.toBeInTheDocument();
  });
});

describe('HubManagementCard', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('an admin joins a hub: malformed values are named first, the API refusal is shown, then it is managed', async () => {
    let joined = false;
    const calls = api('admin', NOT_MANAGED, {
      'GET /api/v1/managed/status': () => jsonResponse(joined ? MANAGED : NOT_MANAGED),
      'POST /api/v1/managed/join': (_req, body) => {
        if ((body as { token: string }).token === 'pgt1.used') return jsonResponse({ error: { code: 'hub_refused', message: 'the hub refused the enrollment token' } }, 502);
        joined = true;
        return jsonResponse(MANAGED);
      },
    });
    const user = userEvent.setup();
    renderWithProviders(<HubManagementCard />);
    const form = await screen.findByRole('form', { name: 'Join a hub' });
    await user.type(within(form).getByLabelText('Hub URL'), 'http://hub.example.net');
    await user.type(within(form).getByLabelText('Hub pin'), 'AB:CD');
    await user.click(within(form).getByRole('button', { name: 'Join the hub' }));
    expect(await within(form).findByText(/https:\/\/host or https:\/\/host:port/)).toBeInTheDocument();
    expect(within(form).getByText(/64 lowercase hex digits/)).toBeInTheDocument();
    expect(within(form).getByText(/The enrollment token the hub/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);

    await user.clear(within(form).getByLabelText('Hub URL'));
    await user.type(within(form).getByLabelText('Hub URL'), 'https://hub.example.net');
    await user.clear(within(form).getByLabelText('Hub pin'));
    await user.type(within(form).getByLabelText('Hub pin'), PIN);
    await user.type(within(form).getByLabelText('Enrollment token'), 'pgt1.used');
    await user.click(within(form).getByRole('button', { name: 'Join the hub' }));
    expect(await within(form).findByText('the hub refused the enrollment token')).toBeInTheDocument();

    await user.clear(within(form).getByLabelText('Enrollment token'));
    await user.type(within(form).getByLabelText('Enrollment token'), 'pgt1.fresh');
    await user.click(within(form).getByRole('button', { name: 'Join the hub' }));
    expect(await screen.findByTestId('managed-status')).toHaveTextContent('Managed from the hub https://hub.example.net as alpha');
    expect(calls.filter((c) => c.method === 'POST')[1].body).toEqual({ hub_url: 'https://hub.example.net', hub_pin: PIN, token: 'pgt1.fresh' });
  });

  it('only an admin may join; a hub gets no form', async () => {
    api('operator', NOT_MANAGED);
    const { unmount } = renderWithProviders(<HubManagementCard />);
    expect(await screen.findByText(/Not managed from a hub. An admin can join one here./)).toBeInTheDocument();
    expect(screen.queryByRole('form', { name: 'Join a hub' })).not.toBeInTheDocument();
    unmount();
    vi.unstubAllGlobals();
    api('admin', NOT_MANAGED, {}, 'hub');
    renderWithProviders(<HubManagementCard />);
    expect(await screen.findByText(/This gateway is a hub/)).toBeInTheDocument();
    expect(screen.queryByRole('form', { name: 'Join a hub' })).not.toBeInTheDocument();
  });
});
