import { fireEvent, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TlsStatus } from '../api/endpoints';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import { TlsCertificateCard } from './TlsCertificateCard';

const NOW_S = Date.now() / 1000;

function status(fingerprint: string, over: Partial<TlsStatus['certificate'] & object> = {}, reload: TlsStatus['reload'] = { state: 'none', message: null, at: null }): TlsStatus {
  return {
    certificate: {
      subject: 'CN=perigee',
      issuer: 'CN=perigee',
      sans: ['DNS:perigee', 'IP:127.0.0.1'],
      not_before: NOW_S - 86_400,
      not_after: NOW_S + 30 * 86_400 + 3600,
      fingerprint_sha256: fingerprint,
      spki_pin: 'sha256:' + 'ab'.repeat(32),
      key_type: 'EC P-256',
      chain_length: 1,
      self_signed: true,
      source: 'generated',
      uploaded_by: null,
      uploaded_at: null,
      ...over,
    },
    reload,
    backup_available: false,
  };
}

const PEM_CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const PEM_KEY = '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n';

async function fillForm() {
  // fireEvent.change: typing PEM text key by key is slow and user-event treats "{" and "[" as key names.
  fireEvent.change(await screen.findByLabelText('Certificate chain'), { target: { value: PEM_CERT } });
  fireEvent.change(screen.getByLabelText('Private key'), { target: { value: PEM_KEY } });
}

describe('TlsCertificateCard', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('shows the current certificate and no upload form to a non-admin', async () => {
    mockApi({ 'GET /api/v1/system/tls': () => jsonResponse(status('AA:BB')) });
    renderWithProviders(<TlsCertificateCard canUpload={false} />);
    const table = await screen.findByRole('table', { name: 'Current TLS certificate' });
    expect(within(table).getByText('AA:BB')).toBeInTheDocument();
    expect(within(table).getByText('DNS:perigee, IP:127.0.0.1')).toBeInTheDocument();
    expect(within(table).getByText(/\(30 days left\)/)).toBeInTheDocument();
    expect(within(table).getByText('generated at first start')).toBeInTheDocument();
    expect(screen.getByText('self-signed')).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Upload certificate' })).not.toBeInTheDocument();
  });

  it('uploads the pair, then shows the new certificate and a success message', async () => {
    const calls = mockApi({
      'GET /api/v1/system/tls': () => jsonResponse(status('AA:BB')),
      'PUT /api/v1/system/tls': () =>
        jsonResponse(status('CC:DD', { self_signed: false, issuer: 'CN=Example CA', source: 'uploaded', uploaded_by: 'admin', uploaded_at: NOW_S }, { state: 'pending', message: 'waiting', at: null })),
    });
    const user = userEvent.setup();
    renderWithProviders(<TlsCertificateCard canUpload />);
    await fillForm();
    await user.click(screen.getByRole('button', { name: 'Upload certificate' }));

    expect(await screen.findByText(/Certificate saved/)).toBeInTheDocument();
    expect(screen.getByText('CC:DD')).toBeInTheDocument();
    expect(screen.getByText(/uploaded by admin/)).toBeInTheDocument();
    expect(screen.getByText(/Waiting for nginx/)).toBeInTheDocument();
    const put = calls.find((c) => c.method === 'PUT');
    expect(put?.body).toEqual({ certificate: PEM_CERT, private_key: PEM_KEY });
    expect(screen.getByLabelText('Certificate chain')).toHaveValue('');
  });

  it('shows a refusal under the field it names and keeps what was entered', async () => {
    mockApi({
      'GET /api/v1/system/tls': () => jsonResponse(status('AA:BB')),
      'PUT /api/v1/system/tls': () =>
        jsonResponse({ error: { code: 'invalid_tls', message: "private_key: does not match the certificate's public key", field: 'private_key', details: null } }, 422),
    });
    const user = userEvent.setup();
    renderWithProviders(<TlsCertificateCard canUpload />);
    await fillForm();
    await user.click(screen.getByRole('button', { name: 'Upload certificate' }));

    const keyInput = screen.getByLabelText('Private key');
    expect(await screen.findByText("private_key: does not match the certificate's public key")).toBeInTheDocument();
    expect(keyInput).toHaveAttribute('aria-invalid', 'true');
    expect(screen.getByLabelText('Certificate chain')).not.toHaveAttribute('aria-invalid', 'true');
    expect(keyInput).toHaveValue(PEM_KEY);
    expect(screen.queryByText(/Certificate saved/)).not.toBeInTheDocument();
    expect(screen.getByText('AA:BB')).toBeInTheDocument();
  });

  it('reports a reload nginx refused', async () => {
    mockApi({
      'GET /api/v1/system/tls': () =>
        jsonResponse(status('AA:BB', {}, { state: 'failed', message: 'nginx refused the new certificate; the previous one was restored and is served', at: NOW_S })),
    });
    renderWithProviders(<TlsCertificateCard canUpload />);
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('nginx refused the last upload');
    expect(alert).toHaveTextContent('previous one was restored');
  });
});
