import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it } from 'vitest';
import { COLOR_SCHEME_KEY } from '../lib/theme';
import { renderWithProviders } from '../test/render';
import { ThemeToggle } from './ThemeToggle';

describe('ThemeToggle', () => {
  beforeEach(() => localStorage.clear());

  it('switches between light and dark and persists the choice', async () => {
    const user = userEvent.setup();
    renderWithProviders(<ThemeToggle />);
    const html = document.documentElement;
    expect(html).toHaveAttribute('data-mantine-color-scheme', 'light');

    await user.click(screen.getByRole('button', { name: 'Switch to dark theme' }));
    expect(html).toHaveAttribute('data-mantine-color-scheme', 'dark');
    expect(localStorage.getItem(COLOR_SCHEME_KEY)).toBe('dark');

    await user.click(screen.getByRole('button', { name: 'Switch to light theme' }));
    expect(html).toHaveAttribute('data-mantine-color-scheme', 'light');
    expect(localStorage.getItem(COLOR_SCHEME_KEY)).toBe('light');
  });

  it('starts from the persisted choice', () => {
    localStorage.setItem(COLOR_SCHEME_KEY, 'dark');
    renderWithProviders(<ThemeToggle />);
    expect(document.documentElement).toHaveAttribute('data-mantine-color-scheme', 'dark');
    expect(screen.getByRole('button', { name: 'Switch to light theme' })).toBeInTheDocument();
  });
});
