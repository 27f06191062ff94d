// A box that still needs its setup (no config, or the factory config unchanged: the API's needs_setup): an operator
// or admin who lands on the dashboard is taken to the wizard; a viewer is told an operator must run it.
import { screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Outlet, Route, Routes } from 'react-router-dom';
import type { RunningOut } from '../api/endpoints';
import { mockApi, OPERATOR } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import { SetupNeededBanner } from './SetupNeededBanner';
import { SetupRedirect } from './SetupRedirect';

const ADMIN = { ...OPERATOR, id: 1, username: 'admin', role: 'admin' };
const VIEWER = { ...OPERATOR, username: 'vera', role: 'viewer' };

function running(over: Partial<RunningOut>): RunningOut {
  return {
    reachable: true,
    revision: 'factory-default',
    config: null,
    version_id: 1,
    desired_version_id: 1,
    in_sync: true,
    changes: [],
    checked_at: 1,
    error: null,
    needs_setup: true,
    ...over,
  };
}

function app() {
  return (
    <Routes>
      <Route
        element={
          <>
            <SetupRedirect />
            <SetupNeededBanner />
            <Outlet />
          </>
        }
      >
        <Route index element={<p>overview page</p>} />
        <Route path="flows" element={<p>flows page</p>} />
        <Route path="setup" element={<p>wizard page</p>} />
      </Route>
    </Routes>
  );
}

function serve(user: object, runs: RunningOut) {
  return mockApi({ 'GET /api/v1/auth/me': () => jsonResponse(user), 'GET /api/v1/config/running': () => jsonResponse(runs) });
}

describe('a box that needs its setup', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('takes an admin who lands on a box running the factory config to the wizard', async () => {
    serve(ADMIN, running({}));
    renderWithProviders(app());
    expect(await screen.findByText('wizard page')).toBeInTheDocument();
    expect(screen.queryByText('overview page')).not.toBeInTheDocument();
  });

  it('takes an operator to the wizard when the gateway runs no config at all', async () => {
    serve(OPERATOR, running({ revision: null, version_id: null, in_sync: false }));
    renderWithProviders(app());
    expect(await screen.findByText('wizard page')).toBeInTheDocument();
  });

  it('leaves a configured box on the overview, with no banner (a config that kept the factory revision name included)', async () => {
    const calls = serve(ADMIN, running({ needs_setup: false }));
    renderWithProviders(app());
    expect(await screen.findByText('overview page')).toBeInTheDocument();
    await waitFor(() => expect(calls.some((c) => c.path === '/api/v1/config/running')).toBe(true));
    await new Promise((r) => setTimeout(r, 50));
    expect(screen.getByText('overview page')).toBeInTheDocument();
    expect(screen.queryByRole('status', { name: 'This appliance is not set up yet' })).not.toBeInTheDocument();
  });

  it('tells a viewer the appliance is not set up and an operator must run the setup, without redirecting', async () => {
    serve(VIEWER, running({}));
    renderWithProviders(app());
    const banner = await screen.findByRole('status', { name: 'This appliance is not set up yet' });
    expect(banner).toHaveTextContent('runs the factory config (revision factory-default): it serves no client');
    expect(banner).toHaveTextContent('An operator or admin must run the setup wizard');
    expect(screen.queryByRole('link', { name: 'Open the setup wizard' })).not.toBeInTheDocument();
    expect(screen.getByText('overview page')).toBeInTheDocument();
  });

  it('offers an operator who went to another page the way to the wizard', async () => {
    serve(OPERATOR, running({}));
    renderWithProviders(app(), { route: '/flows' });
    const banner = await screen.findByRole('status', { name: 'This appliance is not set up yet' });
    expect(banner).toHaveTextContent('The setup wizard takes it to a working hub or terminal');
    expect(screen.getByRole('link', { name: 'Open the setup wizard' })).toHaveAttribute('href', '/setup');
    expect(screen.getByText('flows page')).toBeInTheDocument();
  });
});
