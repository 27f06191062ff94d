import { Alert, Button, Paper, Stack, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useMemo, useState, type ReactNode } from 'react';
import { Link } from 'react-router-dom';
import { endpoints, type GatewayConfig, type NetInterface } from '../api/endpoints';
import type { FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { useAuth } from '../auth/useAuth';
import { ConfigSaveReview } from '../components/ConfigSaveReview';
import { PageHeader } from '../components/PageHeader';
import { PeerIdentityCard } from '../components/PeerIdentity';
import { QueryView } from '../components/StateViews';
import { CacheForm, CongestionForm, InterfacesForm, NetworksForm, RoleForm, ShapingForm, SplitterForm } from '../components/SystemForms';
import { checkConfig, setupNeeded } from '../lib/system-config';

function Section({ id, title, children }: { id: string; title: string; children: ReactNode }) {
  return (
    <Paper withBorder p="md" component="section" aria-labelledby={id}>
      <Title order={3} size="h4" id={id} mb="sm">
        {title}
      </Title>
      {children}
    </Paper>
  );
}

function SettingsEditor({ initial, interfaces, canEdit }: { initial: GatewayConfig; interfaces: NetInterface[]; canEdit: boolean }) {
  const [draft, setDraft] = useState<GatewayConfig>(initial);
  const [serverErrors, setServerErrors] = useState<FieldErrors>({});
  const [routeError, setRouteError] = useState<string | undefined>();
  const schemaErrors = useMemo(() => checkConfig(draft), [draft]);
  const errors = { ...serverErrors, ...schemaErrors };
  const blocking = routeError ? { ...schemaErrors, 'satellite.routes': routeError } : schemaErrors;
  const edit = (next: GatewayConfig) => {
    setServerErrors({});
    setDraft(next);
  };
  const props = { config: draft, errors, onChange: edit };
  return (
    <Stack>
      <Section id="sys-role" title="Role and interfaces">
        <Stack>
          <RoleForm {...props} />
          <InterfacesForm {...props} interfaces={interfaces} />
        </Stack>
      </Section>
      <Section id="sys-networks" title="Networks">
        <NetworksForm {...props} onRouteError={setRouteError} />
      </Section>
      <Section id="sys-cc" title="Congestion control per leg">
        <CongestionForm {...props} />
      </Section>
      <Section id="sys-splitter" title="Splitter limits">
        <SplitterForm {...props} />
      </Section>
      <Section id="sys-cache" title="Cache">
        <CacheForm {...props} />
      </Section>
      <Section id="sys-shaping" title="Shaping">
        <ShapingForm {...props} />
      </Section>
      {canEdit ? (
        <ConfigSaveReview config={draft} errors={blocking} comment="system settings" onServerErrors={setServerErrors} />
      ) : (
        <Alert color="gray">Viewers see the settings; an operator or admin changes them.</Alert>
      )}
    </Stack>
  );
}

export default function SystemPage() {
  const { user } = useAuth();
  const desired = useQuery({ queryKey: keys.desired, queryFn: endpoints.desiredConfig });
  const interfaces = useQuery({ queryKey: keys.interfaces, queryFn: endpoints.interfaces, refetchInterval: 30_000 });
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running });
  return (
    <>
      <PageHeader
        title="System settings"
        description="The basics of this box. Saving stores a new config version (see Config history) and applies it; the gateway installs it whole or keeps what it ran."
      />
      {setupNeeded(running.data) && (
        <Alert color="blue" mb="md" title="This gateway runs no config yet">
          The setup wizard takes it to a working hub or terminal in one pass.{' '}
          <Button component={Link} to="/setup" size="xs" ml="sm">
            Open the setup wizard
          </Button>
        </Alert>
      )}
      <QueryView query={desired}>
        {(d) => (
          // Remounted when another version becomes the desired one, so the draft starts from it.
          <SettingsEditor key={d.id} initial={d.config} interfaces={interfaces.data?.interfaces ?? []} canEdit={user != null && user.role !== 'viewer'} />
        )}
      </QueryView>
      <Stack mt="md">
        <Section id="sys-peer-identity" title="Peer path">
          <PeerIdentityCard canEdit={user != null && user.role !== 'viewer'} />
        </Section>
      </Stack>
    </>
  );
}
