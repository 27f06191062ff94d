// What a save tells the operator: applied and kept, applied but not kept for the next start (the gateway could
// not write its config file), or refused.
import { screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { ApplyOut } from '../api/endpoints';
import { renderWithProviders } from '../test/render';
import { SavedResult } from './ConfigSaveReview';

function apply(over: Partial<ApplyOut>, persisted: boolean | null, persist_error: string | null = null): ApplyOut {
  return {
    ok: true,
    version_id: 7,
    active_version_id: 7,
    revision: 'v7',
    error: null,
    gateways: [{ gateway: 'hub-1', address: '192.0.2.10', status: 'applied', revision: 'v7', error: null, rollback_error: null, persisted, persist_error }],
    ...over,
  };
}

describe('the result of a save', () => {
  it('says applied when every gateway kept the version', () => {
    renderWithProviders(<SavedResult saved={{ versionId: 7, apply: apply({}, true) }} />);
    expect(screen.getByText('Version 7 applied')).toBeInTheDocument();
  });

  it('names a gateway that runs the version but could not keep it, and what a restart does', () => {
    renderWithProviders(<SavedResult saved={{ versionId: 7, apply: apply({}, false, '/etc/perigee/gateway.json: Read-only file system') }} />);
    const alert = screen.getByRole('alert');
    expect(alert).toHaveTextContent('Version 7 applied, but not kept for the next start');
    expect(alert).toHaveTextContent('hub-1 (/etc/perigee/gateway.json: Read-only file system)');
    expect(alert).toHaveTextContent('A restart of the gateway brings back the config it ran before');
  });

  it('says applied for a gateway too old to say whether it kept it', () => {
    renderWithProviders(<SavedResult saved={{ versionId: 7, apply: apply({}, null) }} />);
    expect(screen.getByText('Version 7 applied')).toBeInTheDocument();
  });

  it('says refused when the apply failed', () => {
    renderWithProviders(<SavedResult saved={{ versionId: 7, apply: apply({ ok: false, error: { message: 'no route', step: 'routes' } }, null) }} />);
    expect(screen.getByRole('alert')).toHaveTextContent('step routes: no route');
  });
});
