import { Alert, Button, Center, Paper, PasswordInput, Stack, Text, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useNavigate } from 'react-router-dom';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { endpoints } from '../api/endpoints';
import { errorFor } from '../lib/field-errors';
import { ME_KEY, useAuth } from './useAuth';

export const MIN_PASSWORD_LENGTH = 12;

export default function ChangePasswordPage() {
  const { user } = useAuth();
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [confirm, setConfirm] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const forced = user?.must_change_password ?? false;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const local: FieldErrors = {};
    if (next.length < MIN_PASSWORD_LENGTH) local.new_password = `At least ${MIN_PASSWORD_LENGTH} characters`;
    if (next === current) local.new_password = 'The new password must differ from the current one';
    if (confirm !== next) local.confirm = 'Does not match the new password';
    setErrors(local);
    setFormError(null);
    if (Object.keys(local).length) return;
    setBusy(true);
    try {
      await endpoints.changePassword(current, next);
      await queryClient.invalidateQueries({ queryKey: ME_KEY });
      navigate('/', { replace: true });
    } catch (err) {
      if (err instanceof ApiError && Object.keys(err.fieldErrors).length) setErrors(err.fieldErrors);
      setFormError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" radius="md" w={420} component="main">
        <form onSubmit={submit} noValidate>
          <Stack>
            <Title order={1} size="h2">
              {forced ? 'Choose a new password' : 'Change password'}
            </Title>
            {forced && (
              <Alert color="yellow" title="Password change required">
                You signed in with a one-time password. Choose your own before using the dashboard.
              </Alert>
            )}
            {formError && (
              <Alert color="red" role="alert">
                {formError}
              </Alert>
            )}
            <PasswordInput label="Current password" autoComplete="current-password" required value={current} onChange={(e) => setCurrent(e.currentTarget.value)} error={errorFor(errors, 'current_password')} />
            <PasswordInput
              label="New password"
              description={`At least ${MIN_PASSWORD_LENGTH} characters`}
              autoComplete="new-password"
              required
              value={next}
              onChange={(e) => setNext(e.currentTarget.value)}
              error={errorFor(errors, 'new_password')}
            />
            <PasswordInput label="Confirm new password" autoComplete="new-password" required value={confirm} onChange={(e) => setConfirm(e.currentTarget.value)} error={errorFor(errors, 'confirm')} />
            <Button type="submit" loading={busy}>
              Save password
            </Button>
            {!forced && (
              <Text size="sm">
                <Button variant="subtle" size="compact-sm" onClick={() => navigate(-1)}>
                  Cancel
                </Button>
              </Text>
            )}
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}
