import { ActionIcon, Alert, Badge, Button, Code, Grid, Paper, Select, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { endpoints, type TokenCreate, type TokenCreated } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { roleAtLeast } from '../auth/roles';
import { useAuth } from '../auth/useAuth';
import { PageHeader } from '../components/PageHeader';
import { ScrollTable } from '../components/ScrollTable';
import { EmptyState, QueryView } from '../components/StateViews';
import { errorFor } from '../lib/field-errors';
import { formatTime } from '../lib/format';

const EMPTY: TokenCreate = { name: '', scope: 'read', expires_in_days: 90 };
const SCOPES = [
  { value: 'read', label: 'read — GET requests only (monitoring, exports)' },
  { value: 'operator', label: 'operator — also the operator’s writes (automation)' },
];

/** API tokens for scripts and monitoring: made from a signed-in session, scoped, expiring, revocable. */
export default function TokensPage() {
  const queryClient = useQueryClient();
  const { user } = useAuth();
  const tokens = useQuery({ queryKey: keys.tokens, queryFn: endpoints.tokens });
  const [draft, setDraft] = useState<TokenCreate>(EMPTY);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [created, setCreated] = useState<TokenCreated | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: keys.tokens });
  const create = useMutation({
    mutationFn: endpoints.createToken,
    onSuccess: async (res) => {
      setCreated(res);
      setDraft(EMPTY);
      setErrors({});
      await refresh();
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const revoke = useMutation({ mutationFn: endpoints.deleteToken, onSuccess: refresh });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(draft);
  };
  const now = Date.now() / 1000;
  return (
    <>
      <PageHeader
        title="API tokens"
        description="For scripts and monitoring: send as 'Authorization: Bearer <secret>'. A token never has more than its owner's role, ends at its expiry, and a password change ends all of its owner's tokens."
      />
      {created && (
        <Alert color="green" mb="md" role="status" title={`Token ${created.token.name} created`} withCloseButton closeButtonLabel="Dismiss" onClose={() => setCreated(null)}>
          <Text size="sm">Copy the secret now: it is shown only this once.</Text>
          <Code block aria-label="New token secret">
            {created.secret}
          </Code>
        </Alert>
      )}
      {revoke.error && (
        <Alert color="red" mb="md" role="alert">
          {errorMessage(revoke.error)}
        </Alert>
      )}
      <QueryView query={tokens}>
        {(list) =>
          list.length === 0 ? (
            <EmptyState title="No API tokens">Create one below for a script or a monitoring system.</EmptyState>
          ) : (
            <ScrollTable minWidth={760} columns={['Name', 'Owner', 'Scope', 'Created', 'Expires', 'Last used']} actions striped aria-label="API tokens">
              {list.map((t) => (
                <Table.Tr key={t.id}>
                  <Table.Td fw={600}>
                    {t.name} <Text span c="dimmed" size="xs" className="mono">{t.prefix}…</Text>
                  </Table.Td>
                  <Table.Td>{t.username}</Table.Td>
                  <Table.Td>
                    <Badge variant="light">{t.scope}</Badge>
                  </Table.Td>
                  <Table.Td>{formatTime(t.created_at)}</Table.Td>
                  <Table.Td>{t.expires_at < now ? <Badge color="red">expired</Badge> : formatTime(t.expires_at)}</Table.Td>
                  <Table.Td>{t.last_used_at ? formatTime(t.last_used_at) : 'never'}</Table.Td>
                  <Table.Td>
                    <ActionIcon
                      variant="subtle"
                      color="red"
                      aria-label={`Revoke token ${t.name}`}
                      loading={revoke.isPending && revoke.variables === t.id}
                      onClick={() => {
                        if (window.confirm(`Revoke token ${t.name}? Whatever uses it is refused from now on.`)) revoke.mutate(t.id);
                      }}
                    >
                      ✕
                    </ActionIcon>
                  </Table.Td>
                </Table.Tr>
              ))}
            </ScrollTable>
          )
        }
      </QueryView>
      <Paper withBorder p="md" mt="lg" component="section" aria-labelledby="new-token">
        <Title order={3} size="h4" id="new-token" mb="sm">
          New token
        </Title>
        <form onSubmit={submit} noValidate>
          <Grid>
            {create.error && !Object.keys(errors).length && (
              <Grid.Col span={12}>
                <Alert color="red" role="alert">
                  {errorMessage(create.error)}
                </Alert>
              </Grid.Col>
            )}
            <Grid.Col span={{ base: 12, sm: 4 }}>
              <TextInput
                label="Token name"
                description="1-64 of letters, digits, space, _ . -; starting with a letter or digit"
                required
                value={draft.name}
                onChange={(e) => setDraft({ ...draft, name: e.currentTarget.value })}
                error={errorFor(errors, 'name')}
              />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 5 }}>
              <Select
                label="Scope"
                description="Never more than your role"
                data={roleAtLeast(user?.role, 'operator') ? SCOPES : SCOPES.slice(0, 1)}
                allowDeselect={false}
                value={draft.scope ?? 'read'}
                onChange={(v) => setDraft({ ...draft, scope: v === 'operator' ? 'operator' : 'read' })}
                error={errorFor(errors, 'scope')}
              />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 3 }}>
              <Select
                label="Expires after"
                data={[
                  { value: '7', label: '7 days' },
                  { value: '30', label: '30 days' },
                  { value: '90', label: '90 days' },
                  { value: '365', label: '365 days' },
                ]}
                allowDeselect={false}
                value={String(draft.expires_in_days ?? 90)}
                onChange={(v) => setDraft({ ...draft, expires_in_days: Number(v ?? 90) })}
                error={errorFor(errors, 'expires_in_days')}
              />
            </Grid.Col>
            <Grid.Col span={12}>
              <Button type="submit" loading={create.isPending}>
                Create token
              </Button>
            </Grid.Col>
          </Grid>
        </form>
      </Paper>
    </>
  );
}
