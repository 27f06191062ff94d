import { Alert, Badge, Button, FileButton, Group, Paper, Stack, Table, Text, Textarea, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { endpoints, type TlsCertificate, type TlsStatus } from '../api/endpoints';
import { ApiError, errorMessage } from '../api/errors';
import { keys } from '../api/keys';
import { QueryView } from './StateViews';

const DAY_S = 86_400;

function formatDate(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}

function CertificateTable({ cert }: { cert: TlsCertificate }) {
  const daysLeft = Math.floor((cert.not_after - Date.now() / 1000) / DAY_S);
  const rows: [string, ReactNode][] = [
    ['Subject', cert.subject],
    ['Names', cert.sans.length ? cert.sans.join(', ') : '—'],
    ['Issuer', cert.self_signed ? `${cert.issuer} (self-signed)` : cert.issuer],
    ['Valid from', formatDate(cert.not_before)],
    ['Valid until', `${formatDate(cert.not_after)} (${daysLeft} days left)`],
    ['Key', cert.key_type],
    ['Chain', `${cert.chain_length} certificate${cert.chain_length === 1 ? '' : 's'}`],
    ['SHA-256', <code key="fp" style={{ wordBreak: 'break-all' }}>{cert.fingerprint_sha256}</code>],
    ['Key pin', <code key="pin" style={{ wordBreak: 'break-all' }}>{cert.spki_pin}</code>],
    ['Origin', cert.source === 'uploaded' ? `uploaded by ${cert.uploaded_by ?? '?'}${cert.uploaded_at ? ` on ${formatDate(cert.uploaded_at)}` : ''}` : 'generated at first start'],
  ];
  return (
    <Table aria-label="Current TLS certificate" withRowBorders={false} verticalSpacing={4}>
      <Table.Tbody>
        {rows.map(([k, v]) => (
          <Table.Tr key={k}>
            <Table.Th scope="row" w={120} fw={500}>
              {k}
            </Table.Th>
            <Table.Td>{v}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

function ReloadState({ status }: { status: TlsStatus }) {
  const { state, message } = status.reload;
  if (state === 'none') return null;
  if (state === 'pending') return <Alert color="blue" role="status">Waiting for nginx to load the new certificate…</Alert>;
  if (state === 'failed') return <Alert color="red" role="alert" title="nginx refused the last upload">{message}</Alert>;
  return null;
}

/** Reads a chosen file into the textarea: the PEM text is what the API takes. */
function PemInput({ label, value, onChange, error, placeholder }: { label: string; value: string; onChange: (v: string) => void; error?: string; placeholder: string }) {
  return (
    <Stack gap={4}>
      <Textarea label={label} value={value} onChange={(e) => onChange(e.currentTarget.value)} error={error} placeholder={placeholder} autosize minRows={3} maxRows={8} spellCheck={false} styles={{ input: { fontFamily: 'monospace', fontSize: 12 } }} />
      <FileButton onChange={(f) => f && f.text().then(onChange)} accept=".pem,.crt,.cer,.key,application/x-pem-file">
        {(props) => (
          <Button {...props} variant="subtle" size="compact-xs" w="fit-content">
            Load {label.toLowerCase()} from a file…
          </Button>
        )}
      </FileButton>
    </Stack>
  );
}

/** The dashboard's own TLS certificate (nginx), and for admins the form to replace it. */
export function TlsCertificateCard({ canUpload }: { canUpload: boolean }) {
  const queryClient = useQueryClient();
  const status = useQuery({
    queryKey: keys.tls,
    queryFn: endpoints.tls,
    // While nginx has not taken the upload yet, look again soon.
    refetchInterval: (q) => (q.state.data?.reload.state === 'pending' ? 2000 : false),
  });
  const [certificate, setCertificate] = useState('');
  const [privateKey, setPrivateKey] = useState('');
  const upload = useMutation({
    mutationFn: () => endpoints.uploadTls(certificate, privateKey),
    onSuccess: (data) => {
      queryClient.setQueryData(keys.tls, data);
      setCertificate('');
      setPrivateKey('');
    },
  });
  const fieldErrors = upload.error instanceof ApiError ? upload.error.fieldErrors : {};
  const generalError = upload.error && !fieldErrors.certificate && !fieldErrors.private_key ? errorMessage(upload.error) : null;

  return (
    <Paper withBorder p="md" component="section" aria-labelledby="tls-title">
      <Group justify="space-between" mb="xs">
        <Title order={3} size="h5" id="tls-title">
          TLS certificate
        </Title>
        {status.data?.certificate && <Badge color={status.data.certificate.self_signed ? 'orange' : 'green'}>{status.data.certificate.self_signed ? 'self-signed' : 'CA-issued'}</Badge>}
      </Group>
      <QueryView query={status}>
        {(s) => (
          <Stack gap="sm">
            {s.certificate ? <CertificateTable cert={s.certificate} /> : <Text size="sm">nginx has not made a certificate yet.</Text>}
            <ReloadState status={s} />
          </Stack>
        )}
      </QueryView>
      {canUpload && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            upload.mutate();
          }}
        >
          <Stack gap="sm" mt="md">
            <Text size="sm" c="dimmed">
              Replace it with your own: the certificate chain (server certificate first) and its unencrypted private key (RSA 2048+ or EC P-256/P-384), both PEM. Nothing changes unless both are valid; if nginx refuses them, the current certificate is put back.
            </Text>
            <PemInput label="Certificate chain" value={certificate} onChange={setCertificate} error={fieldErrors.certificate} placeholder="-----BEGIN CERTIFICATE-----" />
            <PemInput label="Private key" value={privateKey} onChange={setPrivateKey} error={fieldErrors.private_key} placeholder="-----BEGIN PRIVATE KEY-----" />
            <Group>
              <Button type="submit" disabled={!certificate.trim() || !privateKey.trim()} loading={upload.isPending}>
                Upload certificate
              </Button>
            </Group>
            {upload.isSuccess && (
              <Alert color="green" role="status">
                Certificate saved; nginx reloads it within a few seconds. Reload the page to see it served.
              </Alert>
            )}
            {generalError && (
              <Alert color="red" role="alert" title="Upload refused">
                {generalError}
              </Alert>
            )}
          </Stack>
        </form>
      )}
    </Paper>
  );
}
