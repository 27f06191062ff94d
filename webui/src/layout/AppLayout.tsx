import { AppShell, Burger, Group, Menu, NavLink, ScrollArea, Text, Title, UnstyledButton } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { Suspense } from 'react';
import { NavLink as RouterNavLink, Outlet, useLocation } from 'react-router-dom';
import { roleAtLeast } from '../auth/roles';
import { useAuth } from '../auth/useAuth';
import { LoadingState } from '../components/StateViews';
import { ThemeToggle } from '../components/ThemeToggle';
import { LiveStatusBadge } from '../live/LiveStatusBadge';
import { LiveFlowsProvider } from '../live/LiveFlowsProvider';
import { NAV_ITEMS } from './nav';
import { DriftBanner } from '../components/DriftBanner';
import { ManagedBanner } from '../components/managed/ManagedBanner';
import { SetupNeededBanner } from '../components/SetupNeededBanner';
import { SetupRedirect } from '../components/SetupRedirect';

export function AppLayout() {
  const [opened, { toggle, close }] = useDisclosure();
  const { user, logout } = useAuth();
  const location = useLocation();

  return (
    <LiveFlowsProvider>
    <AppShell
      header={{ height: 56 }}
      navbar={{ width: 220, breakpoint: 'md', collapsed: { mobile: !opened } }}
      padding="md"
    >
      <a href="#main" className="skip-link">
        Skip to content
      </a>
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="md" size="sm" aria-label="Toggle navigation" />
            <Title order={1} size="h3">
              Perigee
            </Title>
            <LiveStatusBadge />
          </Group>
          <Group gap="sm" wrap="nowrap">
            <ThemeToggle />
            <Menu position="bottom-end">
              <Menu.Target>
                <UnstyledButton aria-label="Account menu" px="xs">
                  <Text size="sm" fw={500}>
                    {user?.username ?? ''} {user?.role ? `(${user.role})` : ''}
                  </Text>
                </UnstyledButton>
              </Menu.Target>
              <Menu.Dropdown>
                <Menu.Item component={RouterNavLink} to="/change-password">
                  Change password
                </Menu.Item>
                <Menu.Item color="red" onClick={() => void logout()}>
                  Log out
                </Menu.Item>
              </Menu.Dropdown>
            </Menu>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Main navigation">
        <ScrollArea>
          <nav>
            {NAV_ITEMS.filter((i) => !i.minRole || roleAtLeast(user?.role, i.minRole)).map((item) => (
              <NavLink
                key={item.to}
                component={RouterNavLink}
                to={item.to}
                end={item.to === '/'}
                label={item.label}
                active={item.to === '/' ? location.pathname === '/' : location.pathname.startsWith(item.to)}
                onClick={close}
              />
            ))}
          </nav>
        </ScrollArea>
      </AppShell.Navbar>
      <AppShell.Main id="main" tabIndex={-1}>
        <SetupRedirect />
        {/* The wizard says itself what the gateway runs and what applying changes. */}
        {location.pathname !== '/setup' && <SetupNeededBanner />}
        {location.pathname !== '/setup' && <ManagedBanner />}
        {location.pathname !== '/setup' && <DriftBanner />}
        <Suspense fallback={<LoadingState />}>
          <Outlet />
        </Suspense>
      </AppShell.Main>
    </AppShell>
    </LiveFlowsProvider>
  );
}
