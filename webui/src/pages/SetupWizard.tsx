import { Alert, Button, Group, Paper, Stack, Stepper, Switch, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Link } from 'react-router-dom';
import { endpoints, type GatewayConfig, type NetInterface } from '../api/endpoints';
import type { FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { ConfigSaveReview } from '../components/ConfigSaveReview';
import { PageHeader } from '../components/PageHeader';
import { QueryView } from '../components/StateViews';
import { CongestionForm, InterfacesForm, LinkRatesForm, NetworksForm, ResolversForm, RoleForm } from '../components/SystemForms';
import { cacheResolverError, checkConfig, errorsUnder, setupNeeded, WIZARD_STEPS, wizardStart } from '../lib/system-config';

function Wizard({ base, interfaces }: { base: GatewayConfig; interfaces: NetInterface[] }) {
  const [step, setStep] = useState(0);
  const [draft, setDraft] = useState<GatewayConfig>(() => wizardStart(base, interfaces));
  const [routeError, setRouteError] = useState<string | undefined>();
  const [serverErrors, setServerErrors] = useState<FieldErrors>({});
  const [applied, setApplied] = useState<number | null>(null);
  const draftErrors = useMemo(() => {
    const resolver = cacheResolverError(draft);
    return resolver ? { 'dns.upstream': resolver, ...checkConfig(draft) } : checkConfig(draft);
  }, [draft]);
  const errors = { ...serverErrors, ...draftErrors };
  const stepErrors = (i: number) => {
    const found = errorsUnder(draftErrors, WIZARD_STEPS[i].fields);
    return i === 2 && routeError ? { ...found, 'satellite.routes': routeError } : found;
  };
  const blocked = Object.keys(stepErrors(step)).length > 0;
  const edit = (next: GatewayConfig) => {
    setServerErrors({});
    setDraft(next);
  };
  const props = { config: draft, errors, onChange: edit };
  // A step whose fields the server refused is where the operator goes back to.
  const onServerErrors = (e: FieldErrors) => {
    setServerErrors(e);
    const at = WIZARD_STEPS.findIndex((s) => Object.keys(errorsUnder(e, s.fields)).length > 0);
    if (at >= 0) setStep(at);
  };

  if (applied != null) {
    return (
      <Alert color="green" title="The gateway is set up" role="status">
        <Text size="sm">
          Version {applied} runs: the gateway splits the served subnets' TCP as a {draft.role}, with {draft.satellite.congestion_control} on the satellite leg.
        </Text>
        <Group mt="sm">
          <Button component={Link} to="/">
            Go to the overview
          </Button>
          <Button component={Link} to="/system" variant="default">
            More settings
          </Button>
        </Group>
      </Alert>
    );
  }
  return (
    <Paper withBorder p="md">
      <Stepper active={step} onStepClick={(i) => i < step && setStep(i)} allowNextStepsSelect={false} size="sm">
        <Stepper.Step label={WIZARD_STEPS[0].label}>
          <Stack mt="md">
            <RoleForm {...props} />
            <Text size="sm" c="dimmed">
              A hub sits at the teleport, in front of the servers; a terminal at the remote site, in front of the users. Either splits the TCP of the served subnets at
              the satellite link.
            </Text>
          </Stack>
        </Stepper.Step>
        <Stepper.Step label={WIZARD_STEPS[1].label}>
          <Stack mt="md">
            <InterfacesForm {...props} interfaces={interfaces} />
            {interfaces.length === 0 && <Text c="dimmed">The gateway listed no interfaces.</Text>}
          </Stack>
        </Stepper.Step>
        <Stepper.Step label={WIZARD_STEPS[2].label}>
          <Stack mt="md">
            <NetworksForm {...props} onRouteError={setRouteError} />
          </Stack>
        </Stepper.Step>
        <Stepper.Step label={WIZARD_STEPS[3].label}>
          <Stack mt="md">
            <CongestionForm {...props} />
            <LinkRatesForm {...props} />
            <Text size="sm" c="dimmed">
              The link's rates, as your modem or service contract gives them, let the peer path send the first bytes of each flow twice (a frame lost to rain
              then costs no round trip) and the Overview show how full the link is. Leave 0 if you do not know them.
            </Text>
            <Switch
              label="Cache web objects (HTTP through Squid; sizes in System settings)"
              checked={draft.cache.enabled}
              onChange={(e) => edit({ ...draft, cache: { ...draft.cache, enabled: e.currentTarget.checked } })}
            />
            {draft.cache.enabled && !draft.dns.enabled && <ResolversForm {...props} />}
          </Stack>
        </Stepper.Step>
        <Stepper.Step label={WIZARD_STEPS[4].label}>
          <Stack mt="md">
            <Text size="sm">Review what this config sets, then apply it. The gateway installs it whole or not at all.</Text>
            <ConfigSaveReview
              config={draft}
              errors={routeError ? { ...draftErrors, 'satellite.routes': routeError } : draftErrors}
              comment="first setup (wizard)"
              onServerErrors={onServerErrors}
              onApplied={setApplied}
              applyLabel="Apply this config"
            />
          </Stack>
        </Stepper.Step>
      </Stepper>
      {step < WIZARD_STEPS.length - 1 && (
        <Group justify="space-between" mt="lg">
          <Button variant="default" onClick={() => setStep(step - 1)} disabled={step === 0}>
            Back
          </Button>
          <Button onClick={() => setStep(step + 1)} disabled={blocked}>
            Next
          </Button>
        </Group>
      )}
      {step === WIZARD_STEPS.length - 1 && (
        <Button variant="default" mt="md" onClick={() => setStep(step - 1)}>
          Back
        </Button>
      )}
    </Paper>
  );
}

export default function SetupWizard() {
  const desired = useQuery({ queryKey: keys.desired, queryFn: endpoints.desiredConfig });
  const interfaces = useQuery({ queryKey: keys.interfaces, queryFn: endpoints.interfaces });
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running });
  return (
    <>
      <PageHeader title="Set up this gateway" description="From nothing configured to a working hub or terminal: role, interfaces, networks, the satellite leg." />
      {running.data && !setupNeeded(running.data) && (
        <Alert color="yellow" mb="md">
          The gateway already runs a config (version {running.data.version_id ?? '?'}): finishing the wizard replaces it. System settings changes one part at a time.
        </Alert>
      )}
      <QueryView query={interfaces}>
        {(list) => <QueryView query={desired}>{(d) => <Wizard base={d.config} interfaces={list.interfaces} />}</QueryView>}
      </QueryView>
    </>
  );
}
