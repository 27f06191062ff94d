import { Alert, Button, Group, Text } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { endpoints } from '../api/endpoints';
import { errorMessage } from '../api/errors';
import { keys } from '../api/keys';

/** Tells when the desired config (latest version) is not what the gateway runs, with a one-click apply. */
export function ApplyBanner() {
  const queryClient = useQueryClient();
  const versions = useQuery({ queryKey: keys.versions, queryFn: () => endpoints.versions() });
  const apply = useMutation({
    mutationFn: (id: number) => endpoints.applyVersion(id, 'applied from the dashboard'),
    onSettled: () => queryClient.invalidateQueries({ queryKey: keys.versions }),
  });
  const latest = versions.data?.latest_version_id ?? null;
  const active = versions.data?.active_version_id ?? null;
  if (latest == null || latest === active) return null;
  const failed = apply.data && !apply.data.ok;
  return (
    <Alert color={failed ? 'red' : 'yellow'} mb="md" title={`Version ${latest} is not applied`} role="status">
      <Group justify="space-between" wrap="wrap">
        <Text size="sm">
          {active == null ? 'Nothing has been applied to the gateway yet.' : `The gateway runs version ${active}.`}{' '}
          {failed && `Apply failed: ${String(apply.data?.error?.message ?? 'see Config history')}`}
          {apply.error && `Apply failed: ${errorMessage(apply.error)}`}
        </Text>
        <Group gap="xs">
          <Button component={Link} to={`/history?a=${active ?? latest}&b=${latest}`} variant="default" size="xs">
            Review diff
          </Button>
          <Button size="xs" loading={apply.isPending} onClick={() => apply.mutate(latest)}>
            Apply version {latest}
          </Button>
        </Group>
      </Group>
    </Alert>
  );
}
