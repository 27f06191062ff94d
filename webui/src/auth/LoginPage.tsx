import { Alert, Button, Center, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { Navigate, useLocation, useNavigate } from 'react-router-dom';
import { errorMessage } from '../api/errors';
import { ThemeToggle } from '../components/ThemeToggle';
import { useAuth } from './useAuth';

export default function LoginPage() {
  const { user, login } = useAuth();
  const navigate = useNavigate();
  const location = useLocation();
  const [username, setUsername] = useState('admin');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const from = (location.state as { from?: string } | null)?.from ?? '/';

  if (user && !busy) return <Navigate to={user.must_change_password ? '/change-password' : from} replace />;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const u = await login(username, password);
      navigate(u?.must_change_password ? '/change-password' : from, { replace: true });
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" radius="md" w={380} component="main">
        <form onSubmit={submit} noValidate aria-describedby={error ? 'login-error' : undefined}>
          <Stack>
            <Stack gap={2}>
              <Title order={1} size="h2">
                Perigee
              </Title>
              <Text c="dimmed" size="sm">
                Sign in to the satellite gateway
              </Text>
            </Stack>
            {error && (
              <Alert color="red" role="alert" id="login-error">
                {error}
              </Alert>
            )}
            <TextInput label="Username" autoComplete="username" required value={username} onChange={(e) => setUsername(e.currentTarget.value)} data-autofocus />
            <PasswordInput label="Password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.currentTarget.value)} autoFocus />
            <Button type="submit" loading={busy} fullWidth>
              Sign in
            </Button>
            <Text size="xs" c="dimmed">
              First start: the admin&apos;s one-time password is in the file <code>initial-admin-password</code> in the API&apos;s data directory (readable by its service user only; the API&apos;s log names the path).
            </Text>
          </Stack>
        </form>
        <Center mt="md">
          <ThemeToggle />
        </Center>
      </Paper>
    </Center>
  );
}
