import { Alert, Button, FileInput, Group, List, Paper, Stack, Text, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints } from '../api/endpoints';
import { ApiError, errorMessage } from '../api/errors';
import { PageHeader } from '../components/PageHeader';

function saveJson(data: unknown, name: string) {
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export default function BackupPage() {
  const queryClient = useQueryClient();
  const [file, setFile] = useState<File | null>(null);
  const download = useMutation({
    mutationFn: endpoints.backup,
    onSuccess: (data) => saveJson(data, `perigee-backup-${new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-')}.json`),
  });
  const restore = useMutation({
    mutationFn: (f: File) => endpoints.restore(f),
    onSuccess: () => queryClient.invalidateQueries(),
  });
  const restoreFieldError = restore.error instanceof ApiError ? Object.entries(restore.error.fieldErrors) : [];

  return (
    <>
      <PageHeader title="Backup and restore" description="Config versions, users (password hashes only) and BoD profiles in one JSON file." />
      <Stack>
        <Paper withBorder p="md" component="section" aria-labelledby="backup-title">
          <Title order={3} size="h4" id="backup-title" mb="xs">
            Backup
          </Title>
          <Text size="sm" c="dimmed" mb="sm">
            Keep the file somewhere safe: it holds password hashes.
          </Text>
          <Button onClick={() => download.mutate()} loading={download.isPending}>
            Download backup
          </Button>
          {download.isSuccess && <Text size="sm" mt="xs" role="status">Backup downloaded.</Text>}
          {download.error && <Alert color="red" mt="sm" role="alert">{errorMessage(download.error)}</Alert>}
        </Paper>
        <Paper withBorder p="md" component="section" aria-labelledby="restore-title">
          <Title order={3} size="h4" id="restore-title" mb="xs">
            Restore
          </Title>
          <Text size="sm" c="dimmed" mb="sm">
            The whole file is checked first and written in one transaction: either everything is restored or nothing changes. Sessions of removed users end.
          </Text>
          <Group align="flex-end" wrap="wrap">
            <FileInput label="Backup file" placeholder="perigee-backup-….json" accept="application/json,.json" value={file} onChange={setFile} w={320} clearable />
            <Button
              color="orange"
              disabled={!file}
              loading={restore.isPending}
              onClick={() => file && window.confirm('Replace config versions, users and BoD profiles with the backup?') && restore.mutate(file)}
            >
              Restore
            </Button>
          </Group>
          {restore.data && (
            <Alert color="green" mt="sm" role="status">
              Restored {restore.data.versions} config versions, {restore.data.users} users and {restore.data.bod_profiles} BoD profiles.
            </Alert>
          )}
          {restore.error && (
            <Alert color="red" mt="sm" role="alert" title="Restore refused">
              {errorMessage(restore.error)}
              {restoreFieldError.length > 1 && (
                <List size="sm" mt="xs">
                  {restoreFieldError.map(([k, v]) => (
                    <List.Item key={k}>
                      <code>{k}</code>: {v}
                    </List.Item>
                  ))}
                </List>
              )}
            </Alert>
          )}
        </Paper>
      </Stack>
    </>
  );
}
