import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { schemaDefaultConfig } from '../test/config';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import SystemPage from './SystemPage';

function systemApi(role: 'operator' | 'viewer' = 'operator', applyOk = true) {
  return mockApi({
    'GET /api/v1/auth/me': () => jsonResponse({ id: 2, username: 'otto', role, must_change_password: false }),
    'GET /api/v1/system/interfaces': () => jsonResponse({ interfaces: [] }),
    'GET /api/v1/config': () => jsonResponse({ id: 4, config: schemaDefaultConfig() }),
    'GET /api/v1/config/running': () => jsonResponse({ reachable: true, revision: 'v4', config: null, version_id: 4, desired_version_id: 4, in_sync: true, changes: [], checked_at: 1, error: null, needs_setup: false }),
    'POST /api/v1/config/preview': () =>
      jsonResponse({ base_version_id: 4, changes: [{ path: '$.splitter.max_flows', op: 'changed', old: 10000, new: 5000 }], issues: [] }),
    'PUT /api/v1/config': () => jsonResponse({ version_id: 5, issues: [] }),
    'POST /api/v1/versions/5/apply': () =>
      jsonResponse(
        applyOk
          ? { ok: true, version_id: 5, active_version_id: 5, revision: 'v5', error: null }
          : { ok: false, version_id: 5, active_version_id: 4, error: { code: 'apply_failed', message: 'squid -k parse failed', step: 'squid' } },
      ),
  });
}

async function setMaxFlows(user: ReturnType<typeof userEvent.setup>, value: string) {
  const input = await screen.findByRole('textbox', { name: /Max flows/ });
  await user.clear(input);
  if (value) await user.type(input, value);
  return input;
}

describe('SystemPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it("checks fields with the gateway's schema, shows the diff, then saves and applies a version", async () => {
    const calls = systemApi();
    const user = userEvent.setup();
    renderWithProviders(<SystemPage />, { route: '/system' });
    const input = await setMaxFlows(user, '0');
    expect(await screen.findByText('must be at least 1')).toBeInTheDocument();
    expect(input).toHaveAttribute('aria-invalid', 'true');
    expect(screen.getByRole('button', { name: 'Review changes' })).toBeDisabled();

    await setMaxFlows(user, '5000');
    await user.click(screen.getByRole('button', { name: 'Review changes' }));
    expect(await screen.findByText('$.splitter.max_flows')).toBeInTheDocument();
    expect(calls.filter((c) => c.method !== 'GET')).toHaveLength(1); // the review stores nothing
    await user.click(screen.getByRole('button', { name: 'Save and apply' }));
    expect(await screen.findByText('Version 5 applied')).toBeInTheDocument();
    const put = calls.find((c) => c.method === 'PUT');
    expect(put?.body).toMatchObject({ comment: 'system settings', config: { splitter: { max_flows: 5000 } } });
  });

  it('says when the gateway refused the version and kept what it ran', async () => {
    systemApi('operator', false);
    const user = userEvent.setup();
    renderWithProviders(<SystemPage />, { route: '/system' });
    await setMaxFlows(user, '5000');
    await user.click(screen.getByRole('button', { name: 'Review changes' }));
    await user.click(await screen.findByRole('button', { name: 'Save and apply' }));
    expect(await screen.findByText('Version 5 was saved but not applied')).toBeInTheDocument();
    expect(screen.getByText(/step squid: squid -k parse failed\. The gateway keeps running what it ran before/)).toBeInTheDocument();
  });

  it('shows viewers the settings without a way to save them', async () => {
    systemApi('viewer');
    renderWithProviders(<SystemPage />, { route: '/system' });
    await waitFor(() => expect(screen.getByText(/an operator or admin changes them/)).toBeInTheDocument());
    expect(screen.queryByRole('button', { name: 'Save and apply' })).toBeNull();
  });

  it('edits what the gateway runs, not a pending version, and says the pending ones stay out', async () => {
    const runs = { ...schemaDefaultConfig(), splitter: { ...schemaDefaultConfig().splitter, idle_timeout_s: 600 } };
    const pendingConfig = { ...schemaDefaultConfig(), splitter: { ...schemaDefaultConfig().splitter, idle_timeout_s: 30 } };
    const calls = mockApi({
      'GET /api/v1/system/interfaces': () => jsonResponse({ interfaces: [] }),
      'GET /api/v1/config': () => jsonResponse({ id: 6, config: pendingConfig }),
      'GET /api/v1/config/running': () =>
        jsonResponse({ reachable: true, revision: 'v3', config: runs, version_id: 3, desired_version_id: 6, in_sync: false, changes: [], checked_at: 1, error: null, needs_setup: false }),
      'POST /api/v1/config/preview': () => jsonResponse({ base_version_id: 3, changes: [{ path: '$.splitter.max_flows', op: 'changed', old: 10000, new: 5000 }], issues: [] }),
    });
    const user = userEvent.setup();
    renderWithProviders(<SystemPage />, { route: '/system' });
    expect(await screen.findByText(/Pending versions are not in this form/)).toBeInTheDocument();
    expect(await screen.findByRole('textbox', { name: /Idle timeout/ })).toHaveValue('600');
    await setMaxFlows(user, '5000');
    await user.click(screen.getByRole('button', { name: 'Review changes' }));
    expect(await screen.findByText(/Changes to version 3 \(what the gateway runs\)/)).toBeInTheDocument();
    const preview = calls.find((c) => c.method === 'POST');
    expect(preview?.path).toBe('/api/v1/config/preview');
    expect((preview?.body as { config: { splitter: { idle_timeout_s: number } } }).config.splitter.idle_timeout_s).toBe(600);
  });
});
