import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import ChangePasswordPage from './ChangePasswordPage';

const me = { id: 1, username: 'admin', role: 'admin', must_change_password: true, disabled: false, created_at: 0 };

describe('ChangePasswordPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('explains the forced change and shows the API field error under its field', async () => {
    const calls = mockApi({
      'GET /api/v1/auth/me': () => jsonResponse(me),
      'POST /api/v1/auth/change-password': () =>
        jsonResponse({ error: { code: 'bad_current_password', message: 'current_password is wrong', field: 'current_password', details: null } }, 422),
    });
    const user = userEvent.setup();
    renderWithProviders(<ChangePasswordPage />);
    expect(await screen.findByText('Password change required')).toBeInTheDocument();
    await user.type(screen.getByLabelText(/^Current password/), 'one-time-xyz');
    await user.type(screen.getByLabelText(/^New password/), 'a-much-longer-secret');
    await user.type(screen.getByLabelText(/^Confirm new password/), 'a-much-longer-secret');
    await user.click(screen.getByRole('button', { name: 'Save password' }));
    // Under the field (Mantine's error slot), not only in the form-level alert.
    expect(await screen.findByText('current_password is wrong', { selector: '.mantine-InputWrapper-error' })).toBeInTheDocument();
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ current_password: 'one-time-xyz', new_password: 'a-much-longer-secret' });
  });

  it('checks length and confirmation before asking the API', async () => {
    const calls = mockApi({ 'GET /api/v1/auth/me': () => jsonResponse(me) });
    const user = userEvent.setup();
    renderWithProviders(<ChangePasswordPage />);
    await user.type(await screen.findByLabelText(/^Current password/), 'one-time-xyz');
    await user.type(screen.getByLabelText(/^New password/), 'short');
    await user.type(screen.getByLabelText(/^Confirm new password/), 'other');
    await user.click(screen.getByRole('button', { name: 'Save password' }));
    expect(await screen.findByText('At least 12 characters', { selector: '.mantine-InputWrapper-error' })).toBeInTheDocument();
    expect(screen.getByText('Does not match the new password')).toBeInTheDocument();
    expect(calls.some((c) => c.method === 'POST')).toBe(false);
  });
});
