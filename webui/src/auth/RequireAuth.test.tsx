import { screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Route, Routes } from 'react-router-dom';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import { RequireAuth } from './RequireAuth';

const user = { id: 1, username: 'admin', role: 'admin', disabled: false, created_at: 0 };

function app() {
  return (
    <Routes>
      <Route path="/login" element={<p>login page</p>} />
      <Route path="/change-password" element={<p>change password page</p>} />
      <Route path="/" element={<RequireAuth><p>secret dashboard</p></RequireAuth>} />
    </Routes>
  );
}

describe('RequireAuth', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('sends visitors without a session to the login page', async () => {
    mockApi({ 'GET /api/v1/auth/me': () => jsonResponse({ error: { code: 'unauthorized', message: 'log in' } }, 401) });
    renderWithProviders(app());
    expect(await screen.findByText('login page')).toBeInTheDocument();
  });

  it('sends a new admin with a one-time password to the forced password change', async () => {
    mockApi({ 'GET /api/v1/auth/me': () => jsonResponse({ ...user, must_change_password: true }) });
    renderWithProviders(app());
    expect(await screen.findByText('change password page')).toBeInTheDocument();
    expect(screen.queryByText('secret dashboard')).not.toBeInTheDocument();
  });

  it('shows the page to a signed-in user', async () => {
    mockApi({ 'GET /api/v1/auth/me': () => jsonResponse({ ...user, must_change_password: false }) });
    renderWithProviders(app());
    expect(await screen.findByText('secret dashboard')).toBeInTheDocument();
  });
});
