import { Alert, Box, Paper, Stack, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useMemo, useState, type ReactNode } from 'react';
import { endpoints, type GatewayConfig, type NetInterface, type PreviewAgainst } from '../api/endpoints';
import type { FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { useAuth } from '../auth/useAuth';
import { ConfigSaveReview, SavedResult, type Saved } from '../components/ConfigSaveReview';
import { HubManagementCard } from '../components/managed/HubManagementCard';
import { PageHeader } from '../components/PageHeader';
import { PeerIdentityCard } from '../components/PeerIdentity';
import { PendingVersionsNote } from '../components/RunningEdit';
import { LoadingState, QueryView } from '../components/StateViews';
import { CacheForm, CongestionForm, InterfacesForm, NetworksForm, RoleForm, ShapingForm, SplitterForm } from '../components/SystemForms';
import { checkConfig } from '../lib/system-config';

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

function SettingsEditor({
  initial,
  interfaces,
  canEdit,
  against,
  onSaved,
}: {
  initial: GatewayConfig;
  interfaces: NetInterface[];
  canEdit: boolean;
  against: PreviewAgainst;
  onSaved: (s: Saved) => void;
}) {
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
        <ConfigSaveReview config={draft} errors={blocking} comment="system settings" onServerErrors={setServerErrors} against={against} onSaved={onSaved} />
      ) : (
        <Alert color="gray">Viewers see the settings; an operator or admin changes them.</Alert>
      )}
    </Stack>
  );
}

export default function SystemPage() {
  // Kept here: saving changes what runs, which remounts the editor on the new version.
  const [saved, setSaved] = useState<Saved | null>(null);
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
      <QueryView query={desired}>
        {(d) => {
          if (running.isPending) return <LoadingState />;
          // Edits start from what the gateway runs, never from a pending version it does not run: saving here
          // must not apply someone's unapplied rules along with a timeout.
          const runs = running.data?.config && running.data.version_id != null ? running.data : null;
          const base = runs ? { id: runs.version_id as number, config: runs.config as GatewayConfig } : { id: d.id, config: d.config };
          return (
            <>
              <PendingVersionsNote running={running.data} title="Pending versions are not in this form" subject="This form" />
              {/* Remounted when what it starts from changes, so the draft starts from it. */}
              <SettingsEditor
                key={`${base.id}`}
                initial={base.config}
                interfaces={interfaces.data?.interfaces ?? []}
                canEdit={user != null && user.role !== 'viewer'}
                against={runs ? 'running' : 'desired'}
                onSaved={setSaved}
              />
              {saved && (
                <Box mt="md">
                  <SavedResult saved={saved} />
                </Box>
              )}
            </>
          );
        }}
      </QueryView>
      <Stack mt="md">
        <Section id="sys-peer-identity" title="Peer path">
          <PeerIdentityCard canEdit={user != null && user.role !== 'viewer'} />
        </Section>
        <Section id="sys-hub-management" title="Hub management">
          <HubManagementCard />
        </Section>
      </Stack>
    </>
  );
}
