import { Badge, Button, Stack, Table, Text } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { errorMessage } from '../../api/errors';
import { peerEndpoints, peerKeys, shortFingerprint, type EnrollmentToken } from '../../api/peer';
import { formatTime } from '../../lib/format';
import { ScrollTable } from '../ScrollTable';

const STATE_COLOR: Record<EnrollmentToken['state'], string> = { live: 'blue', used: 'green', expired: 'gray', revoked: 'red' };

function Used({ t }: { t: EnrollmentToken }) {
  if (t.state === 'revoked') return <Text size="sm">revoked {t.revoked_by ? `by ${t.revoked_by} ` : ''}{formatTime(t.revoked_at)}</Text>;
  if (!t.used_at) return <Text size="sm">—</Text>;
  return (
    <Stack gap={0}>
      <Text size="sm">{formatTime(t.used_at)}</Text>
      {t.used_fingerprint && (
        <Text size="xs" ff="monospace" title={t.used_fingerprint}>
          {shortFingerprint(t.used_fingerprint)}
        </Text>
      )}
      {t.used_version_id != null && <Text size="xs" c="dimmed">version {t.used_version_id}</Text>}
    </Stack>
  );
}

function TokenRow({ t, canEdit }: { t: EnrollmentToken; canEdit: boolean }) {
  const queryClient = useQueryClient();
  const revoke = useMutation({
    mutationFn: () => peerEndpoints.revokeEnrollmentToken(t.id),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: peerKeys.enrollmentTokens }),
  });
  const ask = () => window.confirm(`Revoke the enrollment token for ${t.name}? A terminal that has not used it yet cannot enroll with it.`) && revoke.mutate();
  return (
    <Table.Tr data-token={t.id}>
      <Table.Td fw={600}>{t.name}</Table.Td>
      <Table.Td>
        <Text size="sm" ff="monospace">
          {t.prefixes.join(', ')}
        </Text>
      </Table.Td>
      <Table.Td>
        <Badge color={STATE_COLOR[t.state]}>{t.state}</Badge>
      </Table.Td>
      <Table.Td>{formatTime(t.expires_at)}</Table.Td>
      <Table.Td>
        <Text size="sm">{t.created_by}</Text>
        <Text size="xs" c="dimmed">
          {formatTime(t.created_at)}
        </Text>
      </Table.Td>
      <Table.Td>
        <Used t={t} />
      </Table.Td>
      <Table.Td>
        <Text size="sm">{t.comment || '—'}</Text>
      </Table.Td>
      {canEdit && (
        <Table.Td>
          {t.state === 'live' && (
            <Button size="compact-xs" variant="light" color="red" onClick={ask} loading={revoke.isPending} aria-label={`Revoke the token for ${t.name}`}>
              Revoke
            </Button>
          )}
          {revoke.error && (
            <Text c="red" size="xs" role="alert">
              {errorMessage(revoke.error)}
            </Text>
          )}
        </Table.Td>
      )}
    </Table.Tr>
  );
}

/** Every enrollment token with its state (never the token itself: the hub keeps only its hash). */
export function EnrollmentTokenTable({ tokens, canEdit }: { tokens: EnrollmentToken[]; canEdit: boolean }) {
  if (tokens.length === 0) return <Text c="dimmed">No enrollment token yet.</Text>;
  return (
    <ScrollTable minWidth={900} columns={['Terminal', 'Site prefixes', 'State', 'Expires', 'Created', 'Used', 'Comment']} actions={canEdit} striped aria-label="Enrollment tokens">
      {tokens.map((t) => (
        <TokenRow key={t.id} t={t} canEdit={canEdit} />
      ))}
    </ScrollTable>
  );
}
