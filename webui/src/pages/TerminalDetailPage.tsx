import { Alert, Anchor, Stack } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link, useParams } from 'react-router-dom';
import { ApiError } from '../api/errors';
import { managedEndpoints, managedKeys } from '../api/managed';
import { useCan } from '../auth/roles';
import { ManagedVersionForm } from '../components/managed/ManagedVersionForm';
import { ManagedVersionTable } from '../components/managed/ManagedVersionTable';
import { TerminalReport } from '../components/managed/TerminalReport';
import { TerminalReportedSites } from '../components/managed/TerminalReportedSites';
import { TerminalSites } from '../components/managed/TerminalSites';
import { PageHeader } from '../components/PageHeader';
import { Section } from '../components/Section';
import { ErrorState, QueryView } from '../components/StateViews';

/** One terminal at its hub: what it reports, its sites' figures (its own and the hub's), and the config versions the
 * hub made for it (an admin cancels one not sent yet). */
export default function TerminalDetailPage() {
  const { name = '' } = useParams();
  const can = useCan();
  const canEdit = can('operator');
  const detail = useQuery({ queryKey: managedKeys.detail(name), queryFn: () => managedEndpoints.terminal(name), refetchInterval: 2000 });
  // Only a managed terminal has versions (the API answers 404 for any other).
  const versions = useQuery({
    queryKey: managedKeys.versions(name),
    queryFn: () => managedEndpoints.versions(name),
    refetchInterval: 2000,
    enabled: detail.data?.managed === true,
  });
  const header = (
    <PageHeader
      title={`Terminal ${name}`}
      description={
        <>
          What it last reported to this hub and the config versions made for it here.{' '}
          <Anchor component={Link} to="/terminals" size="sm">
            All terminals
          </Anchor>
        </>
      }
    />
  );
  if (detail.error instanceof ApiError && detail.error.status === 404)
    return (
      <>
        {header}
        <ErrorState error={detail.error} title={`No terminal ${name} is enrolled here`} />
      </>
    );
  return (
    <>
      {header}
      <QueryView query={detail}>
        {(d) => (
          <Stack>
            <TerminalReport d={d} />
            {d.managed && <TerminalReportedSites sites={d.sites} reportedAt={d.last_report_at} />}
            <TerminalSites name={name} prefixes={d.terminal.prefixes} />
            <Section id="terminal-versions" title="Its config versions">
              {d.managed ? (
                <Stack>
                  <QueryView query={versions}>{(v) => <ManagedVersionTable terminal={name} versions={v.versions} canCancel={can('admin')} />}</QueryView>
                  {canEdit && <ManagedVersionForm terminal={name} />}
                </Stack>
              ) : (
                <Alert color="gray">Only a terminal enrolled with a token takes config versions from its hub.</Alert>
              )}
            </Section>
          </Stack>
        )}
      </QueryView>
    </>
  );
}
