import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { schemaDefaultConfig } from '../test/config';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import { PeerIdentityCard } from './PeerIdentity';

const MINE = `sha256:${'1'.repeat(64)}`;
const NEXT = `sha256:${'2'.repeat(64)}`;
const HUB = `sha256:${'3'.repeat(64)}`;

const identity = (next: string | null, fingerprint = MINE) => ({
  role: 'terminal',
  identities: [{ gateway: 'local', fingerprint, certificate_pem: '-----BEGIN CERTIFICATE-----', next_fingerprint: next, error: null }],
  peer: {
    role: 'terminal',
    enabled: true,
    identity: fingerprint,
    identity_error: null,
    listening: false,
    terminals: [],
    refused_unknown: 0,
    egress_refused: 0,
    pool: { hub: '10.71.2.2:7072', hub_fingerprints: [HUB], ready: 16, error: null },
  },
  peer_error: null,
});

function terminalConfig() {
  const config = schemaDefaultConfig();
  config.role = 'terminal';
  config.peer = { ...config.peer, enabled: true, hub: '10.71.2.2', hub_fingerprints: [HUB] };
  return config;
}

describe('PeerIdentityCard', () => {
  afterEach(() => vi.unstubAllGlobals());

  it("shows this terminal's fingerprint to copy, its pool, and rotates then commits a next identity", async () => {
    let staged: string | null = null;
    let current = MINE;
    const calls = mockApi({
      'GET /api/v1/config': () => jsonResponse({ id: 4, config: terminalConfig() }),
      'GET /api/v1/peer/identity': () => jsonResponse(identity(staged, current)),
      'POST /api/v1/peer/identity/rotate': () => {
        staged = NEXT;
        return jsonResponse(identity(staged, current));
      },
      'POST /api/v1/peer/identity/commit': () => {
        current = NEXT;
        staged = null;
        return jsonResponse(identity(staged, current));
      },
    });
    const user = userEvent.setup();
    renderWithProviders(<PeerIdentityCard canEdit />);
    expect(await screen.findByText(MINE)).toBeInTheDocument();
    expect(screen.getByRole('button', { name: "Copy this gateway's fingerprint" })).toBeInTheDocument();
    expect(screen.getByRole('status')).toHaveTextContent('16 connections ready');
    await user.click(screen.getByRole('button', { name: 'Rotate: make a next identity' }));
    expect(await screen.findByText(NEXT)).toBeInTheDocument();
    await user.click(screen.getByRole('button', { name: 'Use the next identity' }));
    await waitFor(() => expect(screen.queryByText(MINE)).not.toBeInTheDocument());
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual(['/api/v1/peer/identity/rotate', '/api/v1/peer/identity/commit']);
  });

  it('sets the hub and its fingerprints; a malformed fingerprint is named before anything is sent', async () => {
    const calls = mockApi({
      'GET /api/v1/config': () => jsonResponse({ id: 4, config: terminalConfig() }),
      'GET /api/v1/peer/identity': () => jsonResponse(identity(null)),
      'PUT /api/v1/peer/hub': () => jsonResponse({ version_id: 5, apply: { ok: true, version_id: 5, active_version_id: 5, revision: 'v5', error: null, gateways: [] } }),
    });
    const user = userEvent.setup();
    renderWithProviders(<PeerIdentityCard canEdit />);
    const form = await screen.findByRole('form', { name: 'Hub' });
    expect(within(form).getByLabelText(/^Hub address/)).toHaveValue('10.71.2.2');
    const fps = within(form).getByLabelText(/^Hub fingerprints/);
    await user.type(fps, '{enter}sha256:nothex');
    await user.click(within(form).getByRole('button', { name: 'Save and apply' }));
    expect(await within(form).findByText(/sha256:nothex: not a fingerprint/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'PUT')).toHaveLength(0);
    await user.clear(fps);
    await user.type(fps, `${HUB}{enter}${NEXT}`);
    await user.click(within(form).getByRole('button', { name: 'Save and apply' }));
    await waitFor(() => expect(calls.filter((c) => c.method === 'PUT')).toHaveLength(1));
    expect(calls.find((c) => c.method === 'PUT')?.body).toEqual({ hub: '10.71.2.2', hub_fingerprints: [HUB, NEXT], enabled: true, comment: '' });
  });

  it('a viewer sees the identity and changes nothing', async () => {
    mockApi({
      'GET /api/v1/config': () => jsonResponse({ id: 4, config: terminalConfig() }),
      'GET /api/v1/peer/identity': () => jsonResponse(identity(null)),
    });
    renderWithProviders(<PeerIdentityCard canEdit={false} />);
    expect(await screen.findByText(MINE)).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: /Rotate/ })).not.toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Save and apply' })).not.toBeInTheDocument();
  });
});
