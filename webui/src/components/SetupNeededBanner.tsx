import { Alert, Button, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { endpoints } from '../api/endpoints';
import { keys } from '../api/keys';
import { useCan } from '../auth/roles';
import { setupNeeded } from '../lib/system-config';

/** On a box that still needs its setup, every page says so: an operator gets the way to the wizard, a viewer
 * learns that the box serves nobody yet and who can change that. */
export function SetupNeededBanner() {
  const canSetUp = useCan()('operator');
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running, refetchInterval: 10_000 });
  const r = running.data;
  if (!setupNeeded(r)) return null;
  const runs =
    r?.revision == null
      ? 'The gateway runs no config: it intercepts nothing.'
      : `The gateway runs the factory config (revision ${r.revision}): it serves no client and routes nothing.`;
  return (
    <Alert color="blue" mb="md" title="This appliance is not set up yet" role="status">
      <Text size="sm">
        {runs}{' '}
        {canSetUp
          ? 'The setup wizard takes it to a working hub or terminal in one pass.'
          : 'An operator or admin must run the setup wizard; until then this dashboard has nothing of yours to show.'}
      </Text>
      {canSetUp && (
        <Button component={Link} to="/setup" size="xs" mt="xs">
          Open the setup wizard
        </Button>
      )}
    </Alert>
  );
}
