// A modal confirmation built on <dialog>: focus moves into it, Escape
// cancels, and focus returns to where it was.

import { h } from '../dom';

export interface ConfirmOptions {
  title: string;
  body: string | Node;
  confirm: string;
  danger?: boolean;
}

export function confirmDialog(options: ConfirmOptions): Promise<boolean> {
  const previous = document.activeElement as HTMLElement | null;
  return new Promise((resolve) => {
    const dialog = h(
      'dialog',
      { 'aria-labelledby': 'dialog-title', class: 'card' },
      h(
        'form',
        { method: 'dialog' },
        h('h2', { id: 'dialog-title' }, options.title),
        h('div', { class: 'dialog-body' }, options.body),
        h(
          'div',
          { class: 'actions' },
          h('button', { value: 'cancel', class: 'secondary', type: 'submit' }, 'Cancel'),
          h('button', { value: 'confirm', class: options.danger ? 'danger' : '', type: 'submit', id: 'dialog-confirm' }, options.confirm),
        ),
      ),
    );
    dialog.addEventListener('close', () => {
      dialog.remove();
      previous?.focus();
      resolve(dialog.returnValue === 'confirm');
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector<HTMLButtonElement>('#dialog-confirm')?.focus();
  });
}
