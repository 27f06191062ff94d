import { ActionIcon, Alert, Badge, Button, Code, Group, Paper, Select, Stack, Table, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useAuth } from '../auth/useAuth';
import { endpoints, type Role, type UserCreated } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { PageHeader } from '../components/PageHeader';
import { ScrollTable } from '../components/ScrollTable';
import { QueryView } from '../components/StateViews';
import { errorFor } from '../lib/field-errors';
import { formatTime } from '../lib/format';

const ROLES: { value: Role; label: string }[] = [
  { value: 'admin', label: 'admin: everything, incl. users and backups' },
  { value: 'operator', label: 'operator: change and apply config' },
  { value: 'viewer', label: 'viewer: read only' },
];

export default function UsersPage() {
  const queryClient = useQueryClient();
  const { user: me } = useAuth();
  const users = useQuery({ queryKey: keys.users, queryFn: endpoints.users });
  const [username, setUsername] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [errors, setErrors] = useState<FieldErrors>({});
  const [secret, setSecret] = useState<UserCreated | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: keys.users });
  const create = useMutation({
    mutationFn: () => endpoints.createUser(username, role),
    onSuccess: async (res) => {
      setSecret(res);
      setUsername('');
      setErrors({});
      await refresh();
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const update = useMutation({
    mutationFn: ({ id, patch }: { id: number; patch: { role?: Role; disabled?: boolean; reset_password?: boolean } }) => endpoints.updateUser(id, patch),
    onSuccess: async (res) => {
      if (res.one_time_password) setSecret(res);
      await refresh();
    },
  });
  const remove = useMutation({ mutationFn: endpoints.deleteUser, onSuccess: refresh });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!/^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/.test(username)) {
      setErrors({ username: 'Letters, digits, "_", ".", "@" and "-", starting with a letter or digit' });
      return;
    }
    create.mutate();
  };
  const actionError = update.error ?? remove.error;

  return (
    <>
      <PageHeader title="Users and roles" description="Who may see and change the gateway. New users get a one-time password they must change at first login." />
      <Stack>
        {secret?.one_time_password && (
          <Alert color="blue" title={`One-time password for ${secret.user.username}`} withCloseButton closeButtonLabel="Dismiss" onClose={() => setSecret(null)} role="status">
            Give it to the user over a safe channel; it is shown only now: <Code>{secret.one_time_password}</Code>
          </Alert>
        )}
        {actionError && <Alert color="red" role="alert">{errorMessage(actionError)}</Alert>}
        <QueryView query={users}>
          {(list) => (
            <ScrollTable minWidth={720} columns={['User', 'Role', 'Status', 'Created']} actions striped aria-label="Users">
              {list.map((u) => (
                <Table.Tr key={u.id}>
                  <Table.Td fw={600}>{u.username}{u.id === me?.id ? ' (you)' : ''}</Table.Td>
                  <Table.Td>
                    <Select
                      aria-label={`Role of ${u.username}`}
                      size="xs"
                      w={130}
                      allowDeselect={false}
                      data={['admin', 'operator', 'viewer']}
                      value={u.role}
                      onChange={(v) => v && v !== u.role && update.mutate({ id: u.id, patch: { role: v as Role } })}
                    />
                  </Table.Td>
                  <Table.Td>
                    <Group gap={4}>
                      {u.disabled ? <Badge color="gray">disabled</Badge> : <Badge color="green" variant="light">active</Badge>}
                      {u.must_change_password && <Badge color="yellow" variant="light">must change password</Badge>}
                    </Group>
                  </Table.Td>
                  <Table.Td>{formatTime(u.created_at)}</Table.Td>
                  <Table.Td>
                    <Group gap={4} justify="flex-end" wrap="nowrap">
                      <Button size="compact-xs" variant="default" onClick={() => update.mutate({ id: u.id, patch: { disabled: !u.disabled } })} disabled={u.id === me?.id}>
                        {u.disabled ? 'Enable' : 'Disable'}
                      </Button>
                      <Button size="compact-xs" variant="default" onClick={() => window.confirm(`Issue a new one-time password for ${u.username}? Their sessions end.`) && update.mutate({ id: u.id, patch: { reset_password: true } })}>
                        Reset password
                      </Button>
                      <ActionIcon variant="subtle" color="red" aria-label={`Delete user ${u.username}`} disabled={u.id === me?.id} onClick={() => window.confirm(`Delete user ${u.username}?`) && remove.mutate(u.id)}>
                        ✕
                      </ActionIcon>
                    </Group>
                  </Table.Td>
                </Table.Tr>
              ))}
            </ScrollTable>
          )}
        </QueryView>
        <Paper withBorder p="md" component="section" aria-labelledby="add-user">
          <Title order={3} size="h4" id="add-user" mb="sm">
            Add a user
          </Title>
          <form onSubmit={submit} noValidate>
            <Group align="flex-start" wrap="wrap">
              <TextInput label="Username" required value={username} onChange={(e) => setUsername(e.currentTarget.value)} error={errorFor(errors, 'username')} w={240} />
              <Select label="Role" data={ROLES} value={role} allowDeselect={false} onChange={(v) => setRole((v ?? 'viewer') as Role)} error={errorFor(errors, 'role')} w={320} />
              <Button type="submit" mt={25} loading={create.isPending}>
                Add user
              </Button>
            </Group>
            {create.error && !Object.keys(errors).length && <Alert color="red" mt="sm" role="alert">{errorMessage(create.error)}</Alert>}
          </form>
        </Paper>
      </Stack>
    </>
  );
}
